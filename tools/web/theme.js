// Light or dark: the choice kept in the browser ("light", "dark"), else what the system prefers
// (prefers-color-scheme), followed as it changes. Loaded before the page paints (not deferred),
// so that a dark page never flashes light; the header's Theme button goes auto -> light -> dark.
"use strict";

const StrataTheme = (() => {
  const STORE = "strata.theme";
  const NEXT = { auto: "light", light: "dark", dark: "auto" };
  const system = window.matchMedia("(prefers-color-scheme: dark)");

  const choice = () => (NEXT[localStorage.getItem(STORE)] ? localStorage.getItem(STORE) : "auto");

  function apply() {
    const c = choice();
    const root = document.documentElement;
    root.dataset.theme = c === "dark" || (c === "auto" && system.matches) ? "dark" : "light";
    const button = document.getElementById("theme");
    if (button) {
      button.textContent = `Theme: ${c}`;
      button.setAttribute("aria-label", `Theme: ${c} (click for ${NEXT[c]})`);
    }
  }

  function cycle() {
    const next = NEXT[choice()];
    if (next === "auto") localStorage.removeItem(STORE);
    else localStorage.setItem(STORE, next);
    apply();
  }

  system.addEventListener("change", apply);
  apply();
  document.addEventListener("DOMContentLoaded", () => {
    apply();
    const button = document.getElementById("theme");
    if (button) button.addEventListener("click", cycle);
  });
  return { choice, cycle };
})();
