"""``python -m pocketmq.deploy``: the ``pocketmq`` command."""

from pocketmq.deploy.cli import main

if __name__ == "__main__":
    main()
