// The timeline's regular-expression search, run in a Web Worker (timeline-ui.js starts it
// from a Blob URL of this file). A pattern such as (\w+\s?)+$ can backtrack for hours on one
// kernel name; here it stalls only this worker, which the page ends after its time limit,
// never the page's own thread.
// Messages in: {names: [...]} (the event names, sent again when they change), then
// {id, pattern}. Out: {id, started: true} as matching begins (the page's time limit counts
// from it), then {id, hits: [indexes of the matching names]} or {id, error: "why"}.
let names = [];
self.onmessage = (ev) => {
  const m = ev.data;
  if (m.names) { names = m.names; return; }
  let rx;
  try { rx = new RegExp(m.pattern, "i"); } catch (e) {
    self.postMessage({id: m.id, error: String(e && e.message || e)});
    return;
  }
  self.postMessage({id: m.id, started: true});
  const hits = [];
  try {
    for (let i = 0; i < names.length; i++) { if (rx.test(names[i])) hits.push(i); }
  } catch (e) {  // e.g. a pattern that overflows the regex engine's stack
    self.postMessage({id: m.id, error: String(e && e.message || e)});
    return;
  }
  self.postMessage({id: m.id, hits: hits});
};
