"""`python -m mapreport`: the same command line as `mapreport`."""

from mapreport.app.entry import run

run()
