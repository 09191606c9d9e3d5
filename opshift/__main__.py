import sys

from opshift.cli import main

sys.exit(main())
