import sys

from mm2_failover.cli import main

sys.exit(main())
