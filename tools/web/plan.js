// The planner page: every change of a control (plan_controls.js) re-plans through POST
// /v1/plan (debounced, the request before cancelled) and draws the plan (plan_view.js); the
// same choices as a `strata plan` command line, the plan as its --json file, one decode step as
// its --svg drawing, its --frontier as a table. "Compare" pins the plan shown: the controls
// then make a second one, drawn beside it.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const Controls = StrataPlanControls;
  const DEBOUNCE_MS = 60;
  let timer = 0, inflight = null, planned = 0;
  let shown = null;   // {request, plan, text, command} on screen
  let pinned = null;  // the same, kept for comparing

  const columnWidth = () => Math.max(280, ($("plans").clientWidth || 900) / (pinned && innerWidth > 1100 ? 2 : 1) - 40);

  function fail(message) {
    $("status").textContent = message;
    $("status").className = "error";
  }

  function drawPlans() {
    $("plan-live").replaceChildren(StrataPlanView.draw(shown.plan, columnWidth(), pinned ? ["This plan", shown.command] : null));
    $("plan-pinned").hidden = !pinned;
    $("comparison").hidden = !pinned;
    if (pinned) {
      $("plan-pinned").replaceChildren(StrataPlanView.draw(pinned.plan, columnWidth(), ["Pinned", pinned.command]));
      $("comparison").textContent = StrataPlanView.comparison(pinned.plan, shown.plan);
    }
  }

  async function post(body, signal) {
    const res = await Strata.api("/v1/plan", { method: "POST", body: JSON.stringify(body), signal });
    if (!res.ok) throw Object.assign(new Error(await Strata.errorText(res)), { status: res.status });
    return res;
  }

  async function showFrontier(r, signal) {
    const view = $("frontier-view");
    view.hidden = !$("frontier").checked;
    if (view.hidden) return;
    const rows = await (await post({ ...r, output: "frontier" }, signal)).json();
    const { el } = Strata;
    view.replaceChildren(el("h2", {}, "Frontier: no other policy is faster per sequence and in aggregate"),
      el("table", { class: "frontier" },
        el("tr", {}, ...["batch", "micro", "KV", "CPU attention", "recompute", "TTFT", "tokens/s per sequence", "tokens/s total"]
          .map((h) => el("th", {}, h))),
        ...rows.map((p) => el("tr", {}, ...[p.batch, p.n_micro, p.kv_type, p.cpu_attention ? "on" : "off", p.recompute ? "on" : "off",
          Strata.formatSeconds(p.ttft_s), p.decode_tps_per_seq.toPrecision(3), p.throughput_tps.toPrecision(3)].map((c) => el("td", {}, String(c)))))));
  }

  async function replan() {
    if (inflight) inflight.abort();
    const controller = (inflight = new AbortController());
    const r = Controls.request();
    const command = Controls.command(r);
    $("command").textContent = command;
    const t0 = performance.now();
    try {
      const text = await (await post(r, controller.signal)).text();
      shown = { request: r, plan: JSON.parse(text), text, command };
      drawPlans();
      await showFrontier(r, controller.signal);
      $("status").textContent = `planned in ${(performance.now() - t0).toFixed(0)} ms`;
      $("status").className = "";
    } catch (e) {
      if (e.name === "AbortError") return;
      fail(e.message);
      if (e.status) {
        shown = null;
        $("plan-live").replaceChildren();
      }
    }
    document.body.dataset.planned = ++planned;
    document.body.dataset.plannedFor = command;  // what the figures shown answer
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(replan, DEBOUNCE_MS);
  }

  function download(name, type, text) {
    const link = Strata.el("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  const fileStem = () => (shown ? shown.request.model.replace(/[^\w.-]+/g, "-") : "plan");

  function bindButtons() {
    $("copy-command").addEventListener("click", async () => {
      $("status").textContent = (await Strata.copyText($("command").textContent)) ? "command copied" : "copy the command above by hand";
    });
    // The server's very bytes: what `strata plan --json` prints and `--plan FILE` loads.
    $("download-json").addEventListener("click", () => shown && download(`${fileStem()}.plan.json`, "application/json", shown.text));
    $("download-svg").addEventListener("click", async () => {
      if (!shown) return;
      try {
        download(`${fileStem()}.decode.svg`, "image/svg+xml", await (await post({ ...shown.request, output: "svg" })).text());
      } catch (e) {
        fail(e.message);
      }
    });
    $("compare").addEventListener("click", () => {
      pinned = pinned ? null : shown;
      $("compare").textContent = pinned ? "Stop comparing" : "Compare: pin this plan";
      document.body.classList.toggle("comparing", !!pinned);
      if (shown) drawPlans();
    });
  }

  async function init() {
    const res = await Strata.api("/v1/plan/options");
    if (!res.ok) return fail(await Strata.errorText(res));
    const options = await res.json();
    $("chat-link").hidden = !options.chat;  // `strata plan --ui` runs no model
    Controls.init(options, schedule);
    $("legend").replaceChildren(...Strata.placementLegend());
    bindButtons();
    let resizing = 0;  // the charts fit the width: drawn again once a resize settles
    addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => shown && drawPlans(), 150);
    });
    replan();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
