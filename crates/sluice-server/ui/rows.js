// Table rows for the live view: text is set as text, never parsed as HTML (keys and
// bucket ids come from callers).

/** A table row; `cells` are [text, field, class] triples. */
export function row(data, cells) {
  const tr = document.createElement('tr');
  Object.assign(tr.dataset, data);
  for (const [text, field, className] of cells) {
    const td = document.createElement('td');
    td.textContent = text;
    td.dataset.field = field;
    if (className) td.className = className;
    tr.append(td);
  }
  return tr;
}

/** A row of one cell across `span` columns saying `text`. */
export function emptyRow(span, text) {
  const tr = document.createElement('tr');
  const td = document.createElement('td');
  td.colSpan = span;
  td.className = 'empty';
  td.textContent = text;
  tr.append(td);
  return tr;
}

/** The id of a policy's row in the policies table, which other tables link to. */
export function policyAnchor(name) {
  return `policy-${name}`;
}

/** A link to the row of policy `name` in the policies table. */
export function policyLink(name) {
  const link = document.createElement('a');
  link.href = `#${policyAnchor(name)}`;
  link.textContent = name;
  return link;
}
