"""`python -m mapreport`: the same command line as `mapreport`."""

from mapreport.cli import main

main()
