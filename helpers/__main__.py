import sys

from helpers.cli import main

sys.exit(main())
