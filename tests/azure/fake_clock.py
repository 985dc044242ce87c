"""Time that passes only when azdl sleeps: the propagation retries' clock in tests."""


class Clock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
