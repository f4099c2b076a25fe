"""`python -m kube_reloader` runs the same command line as the `kube-reloader` script."""

import sys

from kube_reloader.cli import main

sys.exit(main())
