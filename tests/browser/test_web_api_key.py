"""With `strata serve --api-key`, the chat page loads without the key, asks for it once (the
server refused its first requests), keeps it in the browser and sends it: the model's name and
the engine view then arrive, and a reload asks no more."""
import sys

from browser_support import Process, console_errors, session, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model

KEY = "open-sesame"


def main() -> int:
    with Process("serve", "-m", str(default_model()), "--api-key", KEY, ready_path="/health") as server:
        with session() as driver:
            driver.get(server.url("/"))
            dialog = wait_for(driver, lambda d: d.find_element(By.ID, "key-dialog").is_displayed()
                              and d.find_element(By.ID, "key-dialog"), 30, "the key dialog")
            assert "needs an API key" in dialog.text
            field = dialog.find_element(By.CSS_SELECTOR, "input")
            field.send_keys(KEY)
            field.send_keys(Keys.ENTER)
            wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the model's name")
            wait_for(driver, lambda d: "Generating" in d.find_element(By.ID, "engine-stats").text, 30, "the engine view")
            # Before the key, the server refused the page's requests: those 401s, and nothing else.
            errors = console_errors(driver)
            assert errors and all("401" in e for e in errors), errors
            driver.refresh()
            wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the model's name after a reload")
            assert not driver.find_elements(By.CSS_SELECTOR, "#key-dialog[open]"), "asked for the key again"
    print("ok: the page asks for the API key once and sends it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
