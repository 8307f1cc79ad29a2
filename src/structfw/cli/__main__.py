"""``python -m structfw.cli``: the same as the ``structfw`` command."""
from . import main

main()
