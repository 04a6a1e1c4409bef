import sys

from mhalib.cli import main

sys.exit(main())
