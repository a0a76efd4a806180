// The live engine view beside the chat, driven by the server's metrics stream
// (/v1/metrics/stream, server-sent events within a fraction of a second of a change): each
// memory tier's bytes (GPU, DRAM, NVMe and what the disk serves per second), the KV cache's
// blocks, the expert cache's hit rate, what is generating and queued; and where the served
// model's layers and KV cache live (the plan the engine placed them by, from /v1/plan/options).
// The stream reconnects when it ends and pauses while the page is hidden.
"use strict";

const StrataEngine = (() => {
  const RETRY_MS = 2000;
  const RATE_WINDOW_S = 1;

  // [label, text, meter fraction or null] per row of the view.
  function rows(f, nvmeRate) {
    const fmt = Strata.formatBytes;
    const r = [];
    const { gpu, dram, nvme } = f.tiers;
    if (gpu.budget) r.push(["GPU", `${fmt(gpu.used)} of ${fmt(gpu.budget)}`, gpu.used / gpu.budget]);
    r.push(["DRAM", dram.budget ? `${fmt(dram.used)} of ${fmt(dram.budget)}` : `${fmt(dram.used)} (no limit)`,
      dram.budget ? dram.used / dram.budget : null]);
    if (nvme.used || nvme.read)
      r.push(["NVMe", `${fmt(nvme.used)} read as needed${nvmeRate !== null ? `, ${fmt(nvmeRate)}/s now` : ""}`, null]);
    r.push(["KV cache", `${f.kv_blocks.used} of ${f.kv_blocks.total} blocks`, f.kv_blocks.total ? f.kv_blocks.used / f.kv_blocks.total : null]);
    if (f.experts) {
      const chosen = f.experts.hits + f.experts.misses;
      r.push(["Expert cache", chosen ? `${(100 * f.experts.hit_rate).toFixed(1)} % hits (${f.experts.hits} of ${chosen})` : "no expert chosen yet",
        chosen ? f.experts.hit_rate : null]);
    }
    r.push(["Generating", String(f.running), null]);
    r.push(["Queued", String(f.queued), null]);
    r.push(["Tokens/s (busy)", f.tokens_per_s.toFixed(1), null]);
    r.push(["Prompt cache", `${f.cached_tokens} of ${f.cached_tokens + f.prompt_tokens} tokens reused`, null]);
    r.push(["Generated", `${f.generated_tokens} tokens`, null]);
    return r;
  }

  function draw(target, f, nvmeRate) {
    const { el } = Strata;
    target.replaceChildren(...rows(f, nvmeRate).flatMap(([k, v, share]) => [
      el("dt", {}, k),
      el("dd", { "data-row": k }, v, share === null ? null : el("meter", { min: 0, max: 1, value: Math.min(1, share), "aria-label": `${k} in use` })),
    ]));
    target.dataset.running = f.running;
  }

  // "30 in DRAM, 2 on the GPU" for the tiers a plan's layers use, by `pick` (weights or KV).
  function tierCounts(layers, pick) {
    const counts = {};
    for (const l of layers) {
      const tier = pick(l).replace(/^act:/, "").split(/[-(]/)[0];
      counts[tier] = (counts[tier] || 0) + 1;
    }
    return Object.entries(counts).map(([t, n]) => `${n} in ${t.toUpperCase()}`).join(", ");
  }

  async function showPlacement(target) {
    const res = await Strata.api("/v1/plan/options");
    if (!res.ok) return;
    const plan = (await res.json()).served_plan;
    if (!plan) return;
    target.replaceChildren(
      Strata.el("p", { class: "muted" }, `Layers' weights: ${tierCounts(plan.layers, (l) => l.weights)}; KV cache: ` +
        `${tierCounts(plan.layers, (l) => l.kv)}.`),
      Strata.drawPlacement(plan, 270));
  }

  function start(target, placementTarget) {
    showPlacement(placementTarget);
    let controller = null;
    const connect = async () => {
      if (controller || document.hidden) return;
      const mine = (controller = new AbortController());
      const seen = [];  // [t, nvme bytes read] of the last second's events
      try {
        const res = await Strata.api("/v1/metrics/stream", { signal: mine.signal });
        if (!res.ok) throw new Error(await Strata.errorText(res));
        await Strata.readEvents(res, (f) => {
          seen.push([f.t, f.tiers.nvme.read]);
          while (seen.length > 2 && f.t - seen[1][0] >= RATE_WINDOW_S) seen.shift();
          const [t0, read0] = seen[0];
          draw(target, f, f.t > t0 ? (f.tiers.nvme.read - read0) / (f.t - t0) : null);
        });
      } catch (e) {
        if (e.name === "AbortError") return;
        target.replaceChildren(Strata.el("dd", { class: "error" }, `the server does not answer (${e.message})`));
      } finally {
        if (controller === mine) controller = null;
      }
      setTimeout(connect, RETRY_MS);  // the stream ended (the server closes it now and then) or failed
    };
    document.addEventListener("visibilitychange", () => {
      if (document.hidden && controller) controller.abort(), (controller = null);
      else connect();
    });
    connect();
  }

  return { start, rows };
})();
