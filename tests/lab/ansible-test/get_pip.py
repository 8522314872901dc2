"""Stand-in for the pip bootstrap script ansible-test downloads from Ansible's CI file host.

That host is unreachable from our machines; ansible-test looks for the script in ~/.ansible/test/cache/
first, so `make sanity` puts this file there. It does what get-pip.py does — put pip into the running
(empty) virtual environment and install the requested packages — but takes pip from the interpreter's own
ensurepip wheel, then lets that pip install the requested version from the configured package index.
"""

import ensurepip
import os
import sys

ensurepip.bootstrap(upgrade=True)
# ensurepip hides the pip configuration (PIP_CONFIG_FILE=/dev/null) for its own run; give it back so that
# the site's index, certificate and constraints apply to the installation below.
os.environ.pop("PIP_CONFIG_FILE", None)

from pip._internal.cli.main import main  # noqa: E402  (pip exists only after the bootstrap)

arguments = [argument for argument in sys.argv[1:] if argument not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", *arguments]))
