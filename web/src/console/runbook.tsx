// The console's Runbook page: docs/runbook.md as built into the running
// binary (GET /api/runbook), so the page an operator reads is the one for
// the version they run, reachable without the repository. The document
// uses headings, paragraphs, lists, pipe tables and inline code only, so
// a small renderer builds it into elements (never innerHTML: the text is
// shown, not interpreted, and the page's CSP is not loosened).
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from '../components';

/** inline renders `code`, **bold** and [text](link) spans of one line. A
 * link to another document (docs/…) stays its text: only the runbook is
 * served. */
function inline(text: string): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  const re = /`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)]+)\)/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(<code>{m[1]}</code>);
    else if (m[2] !== undefined) out.push(<strong>{m[2]}</strong>);
    else out.push(m[3]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** cells splits a pipe-table row; a pipe inside `code` is part of it. */
function cells(row: string): string[] {
  const s = row.trim().replace(/^\|/, '').replace(/\|$/, '');
  const out: string[] = [];
  let cur = '';
  let code = false;
  for (const c of s) {
    if (c === '`') code = !code;
    if (c === '|' && !code) {
      out.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  out.push(cur.trim());
  return out;
}

/** render builds the document's blocks. */
export function render(md: string): ComponentChildren[] {
  const lines = md.split('\n');
  const blocks: ComponentChildren[] = [];
  for (let i = 0; i < lines.length; ) {
    const line = lines[i];
    if (line.trim() === '') {
      i++;
    } else if (line.startsWith('#')) {
      const level = Math.min(line.match(/^#+/)![0].length + 1, 4);
      const text = inline(line.replace(/^#+\s*/, ''));
      blocks.push(level === 2 ? <h2>{text}</h2> : level === 3 ? <h3>{text}</h3> : <h4>{text}</h4>);
      i++;
    } else if (line.startsWith('|')) {
      const rows: string[] = [];
      for (; i < lines.length && lines[i].startsWith('|'); i++) rows.push(lines[i]);
      const [head, , ...body] = rows;
      blocks.push(
        <table class="list">
          <thead>
            <tr>{cells(head).map((c) => <th>{inline(c)}</th>)}</tr>
          </thead>
          <tbody>
            {body.map((r) => (
              <tr>{cells(r).map((c) => <td>{inline(c)}</td>)}</tr>
            ))}
          </tbody>
        </table>,
      );
    } else if (/^\s*- /.test(line)) {
      const items: string[] = [];
      for (; i < lines.length && lines[i].trim() !== '' && !lines[i].startsWith('|') && !lines[i].startsWith('#'); i++) {
        if (/^\s*- /.test(lines[i])) items.push(lines[i].replace(/^\s*- /, ''));
        else items[items.length - 1] += ' ' + lines[i].trim();
      }
      blocks.push(
        <ul>
          {items.map((t) => (
            <li>{inline(t)}</li>
          ))}
        </ul>,
      );
    } else {
      const para: string[] = [];
      for (; i < lines.length && lines[i].trim() !== '' && !lines[i].startsWith('|') && !lines[i].startsWith('#') && !/^\s*- /.test(lines[i]); i++) {
        para.push(lines[i].trim());
      }
      blocks.push(<p>{inline(para.join(' '))}</p>);
    }
  }
  return blocks;
}

export function Runbook() {
  const [md, setMd] = useState('');
  const [error, setError] = useState('');
  useEffect(() => {
    fetch('/api/runbook')
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(`The runbook could not be loaded (HTTP ${r.status}).`))))
      .then(setMd, (e: Error) => setError(e.message));
  }, []);
  return (
    <div data-testid="runbook">
      <ErrorNote>{error}</ErrorNote>
      {!md && !error && <p>Loading…</p>}
      {md && render(md)}
    </div>
  );
}
