// What the chat page keeps in the browser's storage (conversations, the settings, the chosen
// model) and a conversation as a file: the JSON `strata chat` writes with /save and reads with
// /load ({"template", "system", "messages": [{"role", "content"}]}), so a conversation moves
// between the page and the terminal both ways.
"use strict";

const StrataStore = (() => {
  const CONVERSATIONS = "strata.conversations";
  const SETTINGS = "strata.settings";
  const MODEL = "strata.model";
  const FORMAT_HINT = 'a conversation file is {"template": NAME, "system": TEXT, "messages": [{"role": "user" or "assistant", ' +
    '"content": TEXT}, ...]}, as `strata chat`\'s /save writes it';

  function read(key, fallback) {
    try {
      const value = JSON.parse(localStorage.getItem(key));
      return value ?? fallback;
    } catch (e) {
      return fallback;  // written by something else: start afresh rather than fail to load
    }
  }

  const conversations = () => read(CONVERSATIONS, []);
  const saveConversations = (list) => localStorage.setItem(CONVERSATIONS, JSON.stringify(list));
  const settings = () => read(SETTINGS, {});
  const saveSettings = (s) => localStorage.setItem(SETTINGS, JSON.stringify(s));
  const model = () => localStorage.getItem(MODEL) || "";
  const saveModel = (id) => localStorage.setItem(MODEL, id);

  // A conversation as /save writes it. The page does not know the model's template family:
  // `strata chat` treats the name as informative and renders with its own model's.
  function toSaved(conv) {
    return { template: "", system: conv.system || "", messages: conv.messages.map((m) => ({ role: m.role, content: m.content })) };
  }

  // A file's text -> a new conversation; throws Error naming what is wrong, as /load does.
  function fromSaved(text, name) {
    let j;
    try {
      j = JSON.parse(text);
    } catch (e) {
      throw new Error(`${name} is not valid JSON (${e.message}); ${FORMAT_HINT}`);
    }
    if (j === null || typeof j !== "object" || Array.isArray(j))
      throw new Error(`${name} holds ${Array.isArray(j) ? "an array" : typeof j}, not a conversation object; ${FORMAT_HINT}`);
    const text_field = (obj, key, where) => {
      const v = obj[key];
      if (v === undefined || v === null) return "";
      if (typeof v !== "string") throw new Error(`${where}: "${key}" is ${typeof v}, not a string; ${FORMAT_HINT}`);
      return v;
    };
    const system = text_field(j, "system", name);
    text_field(j, "template", name);
    if (!Array.isArray(j.messages)) throw new Error(`${name} has no "messages" array; ${FORMAT_HINT}`);
    const messages = j.messages.map((m, i) => {
      const where = `${name}: message ${i + 1}`;
      if (m === null || typeof m !== "object" || Array.isArray(m)) throw new Error(`${where} is not an object; ${FORMAT_HINT}`);
      const role = text_field(m, "role", where);
      if (role !== "user" && role !== "assistant")
        throw new Error(`${where} has role '${role}'; expected "user" or "assistant" (the system prompt goes in the "system" field)`);
      if (!("content" in m)) throw new Error(`${where} has no "content"; ${FORMAT_HINT}`);
      return { role, content: text_field(m, "content", where) };
    });
    const first = messages.find((m) => m.role === "user");
    return { id: Date.now().toString(36), title: (first ? first.content : name).slice(0, 40) || name, system, messages };
  }

  // A file name for a conversation: its title, safe on every system.
  function fileName(conv) {
    return `${conv.title.replace(/[^\w.-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "conversation"}.json`;
  }

  return { conversations, saveConversations, settings, saveSettings, model, saveModel, toSaved, fromSaved, fileName };
})();
