"""``python -m satcal``: the command line. Guarded, so a process that multiprocessing's spawn
starts (which imports the main module under another name) does not run the CLI again."""
from .cli import main

if __name__ == "__main__":
    main()
