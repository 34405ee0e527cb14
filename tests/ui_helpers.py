"""What the UI tests share besides fixtures."""
from fixture_paths import REPO_DIR

# Screenshots for a human to look at after a run (git-ignored).
SCREENSHOT_DIR = REPO_DIR / "test-artifacts"
# A name other than localhost that the browser of browser_page_at_test_host resolves to the live
# server: some pages act differently on localhost (Swagger UI asks validator.swagger.io about any other host).
TEST_HOST = "ckptweb.test"


def log_in(page, base_url: str, path: str, username: str, password: str) -> None:
    """Open ``path``, which redirects to the login form, and sign in."""
    page.goto(base_url + path)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
