"""The instructor side of the course: what an instructor reads about a whole class."""
