"""Small screens: at 360 px (and anything below 700) the side column of both pages hides behind
the header's menu button and the conversation or the plan takes the width; nothing is wider
than the screen; the menu opens the column over the page and a tap on the page (or Escape)
closes it; a message can be written and sent. At 1400 px the column is simply there."""
import sys

from browser_support import Process, session, set_width, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model


def box(driver, selector: str) -> dict:
    return driver.execute_script("const r = document.querySelector(arguments[0]).getBoundingClientRect();"
                                 "return {left: r.left, right: r.right, width: r.width, top: r.top, bottom: r.bottom};", selector)


def overflow(driver) -> int:
    return driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")


def check_narrow(driver, main_selector: str) -> None:
    set_width(driver, 360, 740)
    wait_for(driver, lambda d: d.find_element(By.ID, "menu").is_displayed(), 5, "the menu button")
    wait_for(driver, lambda d: box(d, "aside")["right"] <= 0, 5, "the side column to hide")
    assert box(driver, main_selector)["width"] >= 330, box(driver, main_selector)
    assert overflow(driver) <= 0, f"the page is {overflow(driver)} px wider than the screen"
    driver.find_element(By.ID, "menu").click()
    wait_for(driver, lambda d: box(d, "aside")["left"] >= 0 and box(d, "aside")["right"] <= 360, 5, "the column to open")
    assert driver.find_element(By.ID, "menu").get_attribute("aria-expanded") == "true"
    driver.execute_script("document.querySelector('main').click()")
    wait_for(driver, lambda d: box(d, "aside")["right"] <= 0, 5, "a tap on the page to close the column")
    driver.find_element(By.ID, "menu").click()
    wait_for(driver, lambda d: box(d, "aside")["left"] >= 0, 5, "the column to open again")
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    wait_for(driver, lambda d: box(d, "aside")["right"] <= 0, 5, "Escape to close the column")


def main() -> int:
    model = default_model()
    with Process("serve", "-m", str(model), ready_path="/health") as server, session() as driver:
        driver.get(server.url("/"))
        wait_for(driver, lambda d: d.find_element(By.ID, "engine-stats").text, 30, "the page")
        assert not driver.find_element(By.ID, "menu").is_displayed(), "a menu button at 1400 px"
        assert box(driver, "aside")["left"] >= 0
        check_narrow(driver, "main")
        # Usable: the message box and its buttons fit, and a message goes out.
        for selector in ("#prompt", "#send", "#regenerate", "#token-count"):
            assert box(driver, selector)["right"] <= 360, (selector, box(driver, selector))
        driver.execute_script("document.getElementById('max-tokens').value = 8")
        driver.find_element(By.ID, "prompt").send_keys("Hello", Keys.ENTER)
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".message.assistant .stats"), 60, "the reply")
        assert box(driver, ".message.assistant")["right"] <= 360
        assert overflow(driver) <= 0

    with Process("plan", "--ui", ready_path="/v1/plan/options") as ui, session() as driver:
        driver.get(ui.url("/plan"))
        wait_for(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-planned"), 30, "the first plan")
        check_narrow(driver, "main")
        assert box(driver, "#plan-live .cards")["right"] <= 360
    print("ok: below 700 px the side column hides behind the menu button; usable at 360 px")
    return 0


if __name__ == "__main__":
    sys.exit(main())
