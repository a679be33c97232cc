"""Measuring strategies: the evaluation harness (recall@k, accuracy, cost, resumable runs),
public benchmarks, and the plots of runs and evaluations."""
