// The planner page: every change of a control re-plans through POST /v1/plan (debounced, the
// request before cancelled) and draws where each layer's weights and KV cache go, the
// predicted speed and what binds it; the same choices as a `strata plan` command line.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const DEBOUNCE_MS = 60;
  let options = null;
  let timer = 0, inflight = null, planned = 0;

  function fill(select, items, chosen) {
    select.replaceChildren(...items.map(([value, label]) => Strata.el("option", { value, selected: value === chosen }, label)));
  }

  function isFile() {
    return $("model").value.startsWith("file:");
  }

  function gpuEntry() {
    return options.gpus.find((g) => g.name === $("gpu").value);
  }

  // The plan request: the `strata plan` flags by name.
  function request() {
    const r = {};
    const model = $("model").value;
    r.model = model.replace(/^(file|shape):/, "");
    if (!isFile()) r.weight_type = $("weight_type").value;
    r.gpu = $("gpu").value;
    if (gpuEntry()) {
      r.gpu_mem = `${$("gpu_mem").value}G`;
      if ($("pcie").value) r.pcie = $("pcie").value;
    }
    r.dram = `${$("dram").value}G`;
    r.nvme = $("nvme").value;
    r.prompt_len = Number($("prompt_len").value);
    r.gen_len = Number($("gen_len").value);
    r.batch = Number($("batch").value);
    r.objective = $("objective").value;
    r.kv_type = $("kv_type").value;
    return r;
  }

  function shellQuote(s) {
    return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
  }

  function command(r) {
    const file = options.local_models.find((m) => m.name === r.model);
    const args = ["strata", "plan", ...(file && isFile() ? ["-m", file.path] : ["--shape", r.model])];
    const flag = { weight_type: "--weight-type", gpu: "--gpu", gpu_mem: "--gpu-mem", pcie: "--pcie", dram: "--dram",
      nvme: "--nvme", prompt_len: "--prompt-len", gen_len: "--gen-len", batch: "--batch", objective: "--objective",
      kv_type: "--kv-type" };
    for (const [k, f] of Object.entries(flag)) if (r[k] !== undefined) args.push(f, String(r[k]));
    return args.map(shellQuote).join(" ");
  }

  function drawStreams(plan) {
    const d = plan.prediction.decode;
    const entries = Object.entries(d.streams_s);
    const max = Math.max(...entries.map(([, s]) => s), 1e-12);
    const left = 110, width = 600, h = 18;
    const box = Strata.svg("svg", { width: left + width + 90, height: entries.length * (h + 4), role: "img", "aria-label": "decode step per stream" });
    entries.forEach(([name, s], i) => {
      const y = i * (h + 4);
      box.append(Strata.svg("text", { x: 0, y: y + h * 0.75 }, name));
      box.append(Strata.svg("rect", { x: left, y, width: Math.max(1, (width * s) / max), height: h,
        fill: name === d.bottleneck ? "#e6550d" : "#9ecae1" }));
      box.append(Strata.svg("text", { x: left + (width * s) / max + 6, y: y + h * 0.75 }, s > 0 ? Strata.formatSeconds(s) : "–"));
    });
    $("streams").replaceChildren(box);
  }

  function show(plan, ms) {
    const p = plan.prediction;
    $("ttft").textContent = Strata.formatSeconds(p.ttft_s);
    $("tps").textContent = p.decode_tps_per_seq.toPrecision(3);
    $("tps").dataset.value = p.decode_tps_per_seq;
    $("tps-batch").textContent = p.decode_tps_aggregate.toPrecision(3);
    $("bottleneck").textContent = p.decode.bottleneck;
    const used = p.memory_bytes, b = plan.budgets;
    $("memory").textContent = `Uses GPU ${Strata.formatBytes(used.gpu)} of ${Strata.formatBytes(b.gpu)}, DRAM ${Strata.formatBytes(used.dram)} of ` +
      `${Strata.formatBytes(b.dram)}, NVMe ${Strata.formatBytes(used.nvme)}; batch ${plan.policy.batch} in ${plan.policy.n_micro} ` +
      `micro-batch(es), KV ${plan.policy.kv_type}, CPU attention ${plan.policy.cpu_attention ? "on" : "off"}.`;
    $("layers").replaceChildren(Strata.drawPlacement(plan, 900));
    drawStreams(plan);
    $("status").textContent = `planned in ${ms.toFixed(0)} ms`;
    $("status").className = "";
  }

  async function replan() {
    if (inflight) inflight.abort();
    const controller = (inflight = new AbortController());
    const r = request();
    $("command").textContent = command(r);
    const t0 = performance.now();
    try {
      const res = await Strata.api("/v1/plan", { method: "POST", body: JSON.stringify(r), signal: controller.signal });
      if (!res.ok) {
        $("status").textContent = await Strata.errorText(res);
        $("status").className = "error";
        for (const id of ["ttft", "tps", "tps-batch", "bottleneck"]) $(id).textContent = "–";
        delete $("tps").dataset.value;
      } else {
        show(await res.json(), performance.now() - t0);
      }
      document.body.dataset.planned = ++planned;
      document.body.dataset.plannedFor = $("command").textContent; // what the figures shown answer
    } catch (e) {
      if (e.name !== "AbortError") ($("status").textContent = e.message), ($("status").className = "error");
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(replan, DEBOUNCE_MS);
  }

  function showValue(id, format) {
    const input = $(id), out = $(`${id}-out`);
    const update = () => (out.textContent = format(input.value));
    input.addEventListener("input", update);
    update();
    return update;
  }

  function onGpuChange(updateMem) {
    const g = gpuEntry();
    $("gpu_mem").disabled = !g;
    $("pcie").disabled = !g;
    if (g) {
      const gib = Math.round(g.memory_bytes / 2 ** 30);
      $("gpu_mem").max = gib;
      $("gpu_mem").value = gib;
    }
    updateMem();
  }

  async function init() {
    const res = await Strata.api("/v1/plan/options");
    if (!res.ok) {
      $("status").textContent = await Strata.errorText(res);
      $("status").className = "error";
      return;
    }
    options = await res.json();
    $("chat-link").hidden = !options.chat; // `strata plan --ui` runs no model
    const models = $("model");
    if (options.local_models.length)
      models.append(Strata.el("optgroup", { label: "GGUF files" },
        ...options.local_models.map((m) => Strata.el("option", { value: `file:${m.name}` }, m.name))));
    models.append(Strata.el("optgroup", { label: "Catalog shapes" },
      ...options.shapes.map((s) => Strata.el("option", { value: `shape:${s.name}`, selected: s.name === "llama3-70b" },
        `${s.name} (${s.n_layer} layers)`))));
    fill($("gpu"), [["none", "none (CPU only)"], ...options.gpus.map((g) => [g.name, `${g.name} (${Strata.formatBytes(g.memory_bytes)})`])], "rtx4090");
    fill($("nvme"), options.nvme.map((d) => [d.name, `${d.name} (${d.read_gbps} GB/s, e.g. ${d.example})`]), "gen4");
    const updateMem = showValue("gpu_mem", (v) => `${v} GiB`);
    showValue("dram", (v) => `${v} GiB`);
    showValue("prompt_len", (v) => v);
    showValue("gen_len", (v) => v);
    showValue("batch", (v) => v);
    onGpuChange(updateMem);
    $("gpu").addEventListener("change", () => onGpuChange(updateMem));
    $("model").addEventListener("change", () => ($("weight_type").disabled = isFile()));
    $("controls").addEventListener("input", schedule);
    $("controls").addEventListener("change", schedule);
    $("controls").addEventListener("submit", (e) => e.preventDefault());
    $("copy-command").addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText($("command").textContent);
        $("status").textContent = "command copied";
      } catch (e) {
        window.getSelection().selectAllChildren($("command"));
        $("status").textContent = "command selected: copy it with Ctrl+C";
      }
    });
    $("legend").replaceChildren(...Strata.placementLegend());
    replan();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
