"""A reasoning model's reply on the chat page: the server's `reasoning_content` is folded apart
above the answer, as plain text (markup in it stays text), streamed as it comes; the answer
renders as any reply does, and the next request sends the answer alone, as the model's
templates drop earlier reasoning. The stream is a stub's in front of `strata serve`."""
import sys

from browser_support import ask, stubbed_chat  # first: finds Selenium
from selenium.webdriver.common.by import By

THOUGHTS = ["The user greets me. ", "<b>Not bold</b>, ", "I greet back."]
PIECES = [{"reasoning_content": t} for t in THOUGHTS] + ["**Hello** ", "there!"]


def main() -> int:
    with stubbed_chat(PIECES) as (driver, front):
        ask(driver, "Hi")
        reply = driver.find_element(By.CSS_SELECTOR, ".message.assistant")
        details = reply.find_element(By.CSS_SELECTOR, "details.reasoning")
        assert details.get_attribute("open") is None, "the reasoning is folded"
        details.find_element(By.TAG_NAME, "summary").click()
        thoughts = details.find_element(By.CSS_SELECTOR, ".thoughts")
        assert thoughts.text == "".join(THOUGHTS), thoughts.text
        assert not thoughts.find_elements(By.TAG_NAME, "b"), "markup in the reasoning rendered"
        content = reply.find_element(By.CSS_SELECTOR, ".content")
        assert "Hello there!" in content.text and "greet" not in content.text, content.text
        # The next turn sends the answer alone.
        ask(driver, "Again", replies=2)
        sent = [b for m, p, b in front.requests if p == "/v1/chat/completions"][-1]["messages"]
        answer = [m for m in sent if m["role"] == "assistant"][0]
        assert answer == {"role": "assistant", "content": "**Hello** there!"}, answer
    print("ok: the reasoning folds apart above the answer, as text; the next turn sends the answer alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
