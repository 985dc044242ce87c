"""What several test modules share: the mock engine, the shared renderings, the guard that keeps
`slow` honest. Support modules are never named test_*.py; test modules and conftest files are
never imported as libraries (tests/test_architecture.py holds both)."""
