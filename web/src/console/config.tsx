// The console's configuration page: the effective configuration, grouped,
// folded and searchable, with what fell back to a default and why.
import { useState } from 'preact/hooks';
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

type ConfigAnswer = components['schemas']['ConfigAnswer']['data'];
type ConfigItem = ConfigAnswer['items'][number];

/** groupOf is a configuration key's group: its first segment
 * ("ratelimit.apply.limit" → "ratelimit"). */
function groupOf(key: string): string {
  const i = key.indexOf('.');
  return i < 0 ? key : key.slice(0, i);
}

function valueText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** Config is the effective configuration, grouped by the keys' first
 * segment (one collapsible box per group, with its count and how many of
 * its items fell back) and searchable over key, value, source and reason:
 * a hundred items fit a page, and a phone. */
export function Config() {
  const r = useGet<ConfigAnswer>('/ops/config');
  const [onlyFallbacks, setOnlyFallbacks] = useState(false);
  const [query, setQuery] = useState('');
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const c = r.data;
  const q = query.trim().toLowerCase();
  const shown = (c?.items ?? []).filter(
    (i) =>
      (!onlyFallbacks || i.fellBack) &&
      (!q || [i.key, valueText(i.value), i.source, i.reason ?? ''].some((t) => t.toLowerCase().includes(q))),
  );
  const groups: { name: string; items: ConfigItem[] }[] = [];
  for (const i of shown) {
    const g = groupOf(i.key);
    const last = groups.find((x) => x.name === g);
    if (last) last.items.push(i);
    else groups.push({ name: g, items: [i] });
  }
  // A search or the fall-back filter opens every group it leaves; else a
  // group is open unless the operator folded it.
  const isOpen = (g: string) => !!q || onlyFallbacks || open[g] !== false;
  return (
    <>
      <ErrorNote>{r.error}</ErrorNote>
      {c && (
        <>
          <p>
            Version {c.version}, loaded <Stamp iso={c.loadedAt} />. <strong>{c.fellBack}</strong> item(s) fell back to a default.
            {c.unknownKeys && c.unknownKeys.length > 0 && <> Unknown keys ignored: {c.unknownKeys.join(', ')}.</>}
          </p>
          <div class="row tools">
            <input
              type="search"
              name="config-search"
              placeholder="Search keys, values, reasons"
              aria-label="Search the configuration"
              value={query}
              onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
            />
            <label class="inline">
              <input type="checkbox" checked={onlyFallbacks} onChange={(e) => setOnlyFallbacks((e.target as HTMLInputElement).checked)} /> only
              items that fell back
            </label>
            <button
              type="button"
              class="secondary small"
              onClick={() => setOpen(Object.fromEntries(groups.map((g) => [g.name, false])))}
              disabled={!!q || onlyFallbacks}
            >
              Fold all
            </button>
            <button type="button" class="secondary small" onClick={() => setOpen({})} disabled={!!q || onlyFallbacks}>
              Unfold all
            </button>
          </div>
          <div data-testid="config">
            {groups.length === 0 && <p class="muted">No item matches.</p>}
            {groups.map((g) => {
              const fell = g.items.filter((i) => i.fellBack).length;
              return (
                <details
                  key={g.name}
                  class="group"
                  data-group={g.name}
                  open={isOpen(g.name)}
                  onToggle={(e) => {
                    const now = (e.target as HTMLDetailsElement).open;
                    if (now !== isOpen(g.name)) setOpen((o) => ({ ...o, [g.name]: now }));
                  }}
                >
                  <summary>
                    <span class="mono">{g.name}</span>{' '}
                    <span class="muted small">
                      {g.items.length} item{g.items.length === 1 ? '' : 's'}
                      {fell > 0 ? `, ${fell} fell back` : ''}
                    </span>
                  </summary>
                  <table class="list stack">
                    <thead>
                      <tr>
                        <th>Key</th>
                        <th>Value</th>
                        <th>Source</th>
                        <th>Fell back because</th>
                      </tr>
                    </thead>
                    <tbody>
                      {g.items.map((i) => (
                        <tr key={i.key} class={i.fellBack ? 'warn' : ''} data-key={i.key}>
                          <td class="mono small">{i.key}</td>
                          <td class="mono small value">{valueText(i.value)}</td>
                          <td class="small">{i.source}</td>
                          <td class="small">{i.fellBack ? i.reason || 'yes' : ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </details>
              );
            })}
          </div>
        </>
      )}
    </>
  );
}
