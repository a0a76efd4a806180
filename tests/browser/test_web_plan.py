"""The planner page (`strata plan --ui`) in a real browser: it plans on load, re-plans when the
GPU memory slider moves, and shows the tokens/s that `strata plan --json` predicts for the same
choices (so the speed moves the way the cost model says); the command it offers reproduces
the plan; nothing reaches the console's error log."""
import json
import shlex
import subprocess
import sys

from browser_support import STRATA_BIN, Process, console_errors, screenshot, session, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select


def cli_plan(*flags: str) -> dict:
    out = subprocess.run([STRATA_BIN, "plan", *flags, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def page_tps(driver) -> float:
    return float(driver.find_element(By.ID, "tps").get_attribute("data-value"))


def move_slider(driver, slider_id: str, *keys: str, expect: str) -> None:
    """Moves a slider from the keyboard, as a user would, and waits for the plan of `expect`
    (a flag of the command line the page shows)."""
    driver.find_element(By.ID, slider_id).send_keys(*keys)
    wait_for(driver, lambda d: expect in (d.find_element(By.TAG_NAME, "body").get_attribute("data-planned-for") or ""),
             30, f"the plan with {expect}")


def main() -> int:
    with Process("plan", "--ui", ready_path="/v1/plan/options") as ui:
        with session() as driver:
            driver.get(ui.url("/plan"))
            wait_for(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-planned"), 30, "the first plan")
            Select(driver.find_element(By.ID, "model")).select_by_value("shape:llama3-70b")
            Select(driver.find_element(By.ID, "weight_type")).select_by_visible_text("Q4_K")
            Select(driver.find_element(By.ID, "gpu")).select_by_value("rtx4090")

            errors = console_errors(driver)
            assert not errors, f"console errors: {errors}"

            # 1 GiB holds no plan: the page says why, as the command does. The browser logs the
            # 422 answer as a failed load, the one console error this test provokes.
            move_slider(driver, "gpu_mem", Keys.HOME, expect="--gpu-mem 1G")
            status = driver.find_element(By.ID, "status")
            assert status.get_attribute("class") == "error" and "GPU budget" in status.text, status.text
            errors = console_errors(driver)
            assert len(errors) == 1 and "/v1/plan" in errors[0] and "422" in errors[0], f"console errors: {errors}"
            # 4 GiB, then all 24: the page's figures are the command's.
            move_slider(driver, "gpu_mem", Keys.RIGHT, Keys.RIGHT, Keys.RIGHT, expect="--gpu-mem 4G")
            small = page_tps(driver)
            move_slider(driver, "gpu_mem", Keys.END, expect="--gpu-mem 24G")
            large = page_tps(driver)
            command_large = driver.find_element(By.ID, "command").text

            flags = ["--shape", "llama3-70b", "--weight-type", "Q4_K", "--gpu", "rtx4090", "--dram", "64G", "--nvme", "gen4"]
            expect_small = cli_plan(*flags, "--gpu-mem", "4G")["prediction"]["decode_tps_per_seq"]
            expect_large = cli_plan(*flags, "--gpu-mem", "24G")["prediction"]["decode_tps_per_seq"]
            assert expect_small != expect_large, "the model should predict different speeds for 4 and 24 GiB"
            assert abs(small - expect_small) <= 1e-9 * expect_small, (small, expect_small)
            assert abs(large - expect_large) <= 1e-9 * expect_large, (large, expect_large)
            assert (large > small) == (expect_large > expect_small)

            # The offered command line reproduces the shown plan.
            args = shlex.split(command_large)
            assert args[:2] == ["strata", "plan"], args
            assert cli_plan(*args[2:])["prediction"]["decode_tps_per_seq"] == expect_large

            layers = driver.find_elements(By.CSS_SELECTOR, "#layers rect[data-layer]")
            assert len(layers) == 3 * 80, f"llama3-70b has 80 layers, each drawn three times; got {len(layers)} bars"
            assert driver.find_element(By.ID, "bottleneck").text not in ("", "–")
            screenshot(driver, "web-plan.png")
    print("ok: the planner page re-plans with the GPU memory and shows the CLI's prediction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
