"""The command line and what reaches the terminal."""
