// BokehJS, inlined in the first chart output of a session: loaded unless the page has it.
if (typeof window.Bokeh === 'undefined') {
/* CODE */
}
