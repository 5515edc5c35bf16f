"""End-to-end tests that drive real Airflow processes (api-server, scheduler, dag-processor) in a real browser."""


def pytest_configure(config):
    config.addinivalue_line("markers", "ui: drives the real Airflow UI in headless Chromium (needs /usr/bin/chromium)")
