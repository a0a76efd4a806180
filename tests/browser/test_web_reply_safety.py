"""A reply is untrusted: the chat page must render `<script>`, `<img onerror>`, `javascript:`
links and the like as inert text. The model is made to "say" them deterministically by a stub
in front of `strata serve`: it passes the page and every other request through to the real
server (same origin, same headers), and answers /v1/chat/completions with a crafted stream.
Nothing may run: no marker set, no alert, no console error; the HTML shows as text and the
Markdown around it renders."""
import sys
import time

from browser_support import ask, stubbed_chat  # first: finds Selenium
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

HOSTILE = [
    "**Bold** and safe. ",
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>",
    "[a link](javascript:window.__pwned='link') ",
    "<a href=\"javascript:window.__pwned='href'\" id=\"hostile-link\">click</a>",
    "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>",
    "<div onclick=\"window.__pwned='div'\" id=\"hostile-div\">div</div>",
    "\n\n```python\nprint('<script>alert(1)</script>')\n```\n",
]


def main() -> int:
    with stubbed_chat(HOSTILE) as (driver, _front):
        ask(driver, "Say something hostile.")
        # Give anything that was inserted a chance to run, and click what could carry a handler.
        for target in driver.find_elements(By.CSS_SELECTOR, "#hostile-div, #hostile-link, .message.assistant a"):
            try:
                target.click()
            except Exception:
                pass
        time.sleep(0.5)
        assert driver.execute_script("return window.__pwned === undefined"), driver.execute_script("return window.__pwned")
        try:
            driver.switch_to.alert
            raise AssertionError("an alert opened")
        except NoAlertPresentException:
            pass
        reply = driver.find_element(By.CSS_SELECTOR, ".message.assistant .content")
        for selector in ("script", "img", "svg", "iframe", "[onerror]", "[onload]", "[onclick]", "a[href^='javascript']"):
            assert not reply.find_elements(By.CSS_SELECTOR, selector), f"the reply holds {selector}"
        rich = driver.execute_script("return StrataMarkdown.rich")
        if rich:
            assert reply.find_element(By.CSS_SELECTOR, "strong").text == "Bold"
            code = reply.find_element(By.CSS_SELECTOR, "pre code")
            assert "<script>alert(1)</script>" in code.text and "hljs" in code.get_attribute("class")
        # What the model wrote stays readable, as text.
        assert "<script>window.__pwned = 'script'</script>" in reply.text, reply.text
    print(f"ok: a hostile reply rendered inert ({'Markdown' if rich else 'plain text'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
