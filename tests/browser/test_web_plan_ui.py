"""`strata plan --ui` keeps the flags it was started with: the page starts from them and its
first plan is the command's (`strata plan` with the same flags). Without catalog parts it
plans, as the command does, for this machine: the profile of --hw FILE. A flag the page
cannot start from stops the command with an error naming it."""
import atexit
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from browser_support import STRATA_BIN, Process, session, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By


def cli_tps(*flags: str) -> float:
    out = subprocess.run([STRATA_BIN, "plan", *flags, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["prediction"]["decode_tps_per_seq"]


def first_plan(flags: list[str]) -> tuple[list[str], float, str]:
    """The page of `strata plan --ui FLAGS`: its command's flags, its tokens/s, its hardware choice."""
    with Process("plan", "--ui", *flags, ready_path="/v1/plan/options") as ui, session() as driver:
        driver.get(ui.url("/plan"))
        wait_for(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-planned"), 60, "the first plan")
        status = driver.find_element(By.ID, "status")
        assert status.get_attribute("class") != "error", status.text
        args = shlex.split(driver.find_element(By.ID, "command").text)
        tps = float(driver.find_element(By.CSS_SELECTOR, "#plan-live [data-figure=tps]").get_attribute("data-value"))
        return args[2:], tps, driver.find_element(By.ID, "hardware").get_attribute("value")


def main() -> int:
    flags = ["--shape", "mixtral-8x7b", "--weight-type", "Q4_K", "--gpu", "rtx4090", "--gpu-mem", "16G", "--dram", "32G",
             "--workload", "prompt=1024,gen=64", "--batch", "2", "--dram-budget", "80%", "--no-recompute"]
    args, tps, hardware = first_plan(flags)
    assert hardware == "parts", hardware
    for flag in ("--gpu-mem", "--dram-budget", "--no-recompute", "--prompt-len", "--batch"):
        assert flag in args, (flag, args)
    assert args[args.index("--prompt-len") + 1] == "1024" and args[args.index("--batch") + 1] == "2", args
    assert tps == cli_tps(*flags) == cli_tps(*args), (tps, args)

    # No catalog part: this machine, here the profile given with --hw.
    folder = Path(tempfile.mkdtemp(prefix="strata-plan-ui-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    profile = folder / "machine.json"
    subprocess.run([STRATA_BIN, "probe", "--quick", "--no-cache", "-o", str(profile)], check=True, capture_output=True)
    flags = ["--shape", "llama3-8b", "--weight-type", "Q4_K", "--hw", str(profile), "--dram", "16G"]
    args, tps, hardware = first_plan(flags)
    assert hardware == "machine", hardware
    assert "--hw" in args and args[args.index("--hw") + 1] == str(profile), args
    assert tps == cli_tps(*flags) == cli_tps(*args), (tps, args)

    bad = subprocess.run([STRATA_BIN, "plan", "--ui", "--shape", "gpt-9", "--gpu", "none", "--port", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "gpt-9" in bad.stderr, (bad.returncode, bad.stderr)
    print("ok: strata plan --ui starts from its flags, catalog parts or this machine's profile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
