"""The recommendation: picking the winner, and writing it for people (tables) and machines (JSON)."""
