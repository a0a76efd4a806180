"""Markdown that streams: a reply is made to arrive piece by piece (a stub in front of `strata
serve` answers /v1/chat/completions, each piece once the test lets it go), and after each piece
the page must show what the text so far will be once complete: an open code fence is a code
block (its "# comment" not a heading, no literal fence line), highlighted only once it closes;
a table whose delimiter row is half written is already a table; a list item's bare number is
held back; open display math is a math block, not text. At the end: math set by KaTeX (its
fonts load under the page's policy), tables and quotes styled, copy buttons on the code block
and the message that put the right text on the clipboard, a clean console (no highlight.js
notice). Screenshots of the reply at 1400 and 400 px, light and dark, for docs/web.md."""
import sys
import threading

from browser_support import Front, Process, screenshots, session, stream_chat, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model

PIECES = [
    "Here is the code:\n\n```python\n# add two numbers\ndef add(a, b):\n",
    "    return a + b\n```\n\nThe results:\n\n| name | value |\n| ---",
    " | --- |\n| pi | 3.14159 |\n| e | 2.71828 |\n\nSteps:\n\n1. parse\n2",
    ". sum\n\nThe area is\n\n$$\n\\int_0^1 x\\,dx",
    " = \\tfrac{1}{2}\n$$\n\n> Euler: $e^{i\\pi} + 1 = 0$, costs $5 and $10 stay text.\n",
]
WHOLE = "".join(PIECES)


def content(driver):
    return driver.find_elements(By.CSS_SELECTOR, ".message.assistant .content")[-1]


def js(driver, script, *args):
    return driver.execute_script(script, *args)


def main() -> int:
    gates = [threading.Event() for _ in PIECES]
    sent = [threading.Event() for _ in PIECES]

    def gated(i):
        if i > 0:
            sent[i - 1].set()
        assert gates[i].wait(60), f"piece {i} was never let go"

    def reply(handler, body):
        stream_chat(handler, PIECES, gated)
        sent[-1].set()

    def step(driver, i, condition, what):
        gates[i].set()
        assert sent[i].wait(30), f"piece {i} was not sent"
        wait_for(driver, condition, 10, what)

    with Process("serve", "-m", str(default_model()), ready_path="/health") as real, \
            Front(real.url("").rstrip("/"), {("POST", "/v1/chat/completions"): reply}) as front, session() as driver:
        driver.execute_cdp_cmd("Browser.grantPermissions", {"permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
                                                            "origin": front.url("").rstrip("/")})
        driver.get(front.url("/"))
        wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the page")
        if not js(driver, "return StrataMarkdown.rich"):
            print("skipped: built without libjs-marked and node-dompurify: replies are plain text")
            return 77
        prompt = driver.find_element(By.ID, "prompt")
        prompt.send_keys("Show me some Markdown.", Keys.ENTER)

        # An open fence: a code block, not a heading and a literal fence line; not highlighted yet.
        step(driver, 0, lambda d: content(d).find_elements(By.CSS_SELECTOR, "pre.streaming code"), "the open code block")
        c = content(driver)
        code = c.find_element(By.CSS_SELECTOR, "pre.streaming code")
        assert code.text == "# add two numbers\ndef add(a, b):", code.text
        assert not c.find_elements(By.CSS_SELECTOR, "h1"), "a code comment became a heading"
        assert "```" not in c.text, c.text
        assert "hljs" not in code.get_attribute("class"), "highlighted before it closed"

        # Closed: highlighted. A half-written delimiter row already makes the table.
        step(driver, 1, lambda d: content(d).find_elements(By.CSS_SELECTOR, "table th"), "the table's header")
        c = content(driver)
        code = c.find_element(By.CSS_SELECTOR, "pre code")
        assert "hljs" in code.get_attribute("class") and code.find_elements(By.CSS_SELECTOR, ".hljs-comment"), code.get_attribute("outerHTML")
        assert not c.find_elements(By.CSS_SELECTOR, "pre.streaming")
        assert [th.text for th in c.find_elements(By.CSS_SELECTOR, "table th")] == ["name", "value"]
        assert "| ---" not in c.text

        # A list item's bare number waits for the rest of its marker.
        step(driver, 2, lambda d: len(content(d).find_elements(By.CSS_SELECTOR, "ol li")) == 1, "the first list item")
        c = content(driver)
        assert [td.text for td in c.find_elements(By.CSS_SELECTOR, "tbody td")] == ["pi", "3.14159", "e", "2.71828"]
        assert c.find_element(By.CSS_SELECTOR, "ol li").text == "parse", c.find_element(By.CSS_SELECTOR, "ol").text

        # Open display math: a math block still being written, its TeX shown as such.
        step(driver, 3, lambda d: content(d).find_elements(By.CSS_SELECTOR, ".math-display.pending"), "the open math block")
        c = content(driver)
        assert len(c.find_elements(By.CSS_SELECTOR, "ol li")) == 2
        assert "$$" not in c.text and "\\int_0^1" in c.find_element(By.CSS_SELECTOR, ".math-display.pending").text

        # The end: KaTeX sets the block and the inline formula; dollars that are prices stay text.
        step(driver, 4, lambda d: not js(d, "return document.body.classList.contains('streaming')"), "the reply's end")
        wait_for(driver, lambda d: len(content(d).find_elements(By.CSS_SELECTOR, ".math.typeset .katex")) == 2, 10, "KaTeX")
        c = content(driver)
        assert "costs $5 and $10 stay text" in c.find_element(By.CSS_SELECTOR, "blockquote").text
        wait_for(driver, lambda d: js(d, "return [...document.fonts].some((f) => f.family.includes('KaTeX') && f.status === 'loaded')"),
                 10, "KaTeX's fonts")
        # Styled: cell borders, a quote's bar.
        assert js(driver, "return getComputedStyle(arguments[0]).borderTopWidth", c.find_element(By.CSS_SELECTOR, "td")) != "0px"
        assert float(js(driver, "return parseFloat(getComputedStyle(arguments[0]).borderLeftWidth)",
                        c.find_element(By.CSS_SELECTOR, "blockquote"))) >= 3

        # Copy buttons: the code block's code, the message's Markdown.
        c.find_element(By.CSS_SELECTOR, ".code-bar button.copy").click()
        wait_for(driver, lambda d: js(d, "return document.querySelector('.code-bar button.copy').dataset.copied") == "yes", 5, "copied")
        clip = js(driver, "return navigator.clipboard.readText()")
        assert clip == "# add two numbers\ndef add(a, b):\n    return a + b", repr(clip)
        driver.find_elements(By.CSS_SELECTOR, ".message.assistant .role button.copy")[-1].click()
        wait_for(driver, lambda d: js(d, "return navigator.clipboard.readText()") == WHOLE, 5, "the message on the clipboard")

        screenshots(driver, "web-chat-markdown")
    print("ok: a streamed reply renders as it will once complete: code, tables, lists, math; copy buttons copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
