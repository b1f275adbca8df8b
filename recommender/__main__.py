"""`python -m recommender`: the same command line as the `recommender` script (for a profiler or a venv's
python without its scripts on PATH)."""

from recommender.cli.main import main

if __name__ == "__main__":
    main()
