"""`python -m mapreport`: the same command line as `mapreport`."""

from mapreport.app.cli import main

main()
