// The operations console (docs/api.md, "Operations endpoints"): loaded lazily, because most people
// never open it. Its routes live under /console, not /ops, which is the
// API's. Its writes — re-trigger a stopped request, replay a recorded
// approval decision, settle a batch, run a round or reconciliation now —
// each ask for a confirmation first and answer in words. This file is the
// console's frame (the tabs) and its router; each page lives in a file of
// its own beside it.
import { match } from '../router';
import { Access } from './access';
import { Batches, BatchDetail } from './batches';
import { Checks } from './checks';
import { Config } from './config';
import { DeployInbox } from './deploy';
import { Find } from './find';
import { Lookup } from './request';
import { ReviewReport, Reviews } from './reviews';
import { Runbook } from './runbook';
import { Notifications } from './notifications';
import { SecurityEvents } from './security';
import { Unowned } from './unowned';

declare const __RELEASE__: string;

export default function Console({ path }: { path: string }) {
  const req = match('/console/requests/:id', path);
  const batch = match('/console/batches/:id', path);
  const review = match('/console/reviews/:id', path);
  return (
    <section data-release={__RELEASE__ || undefined}>
      <h1>Operations console</h1>
      <nav class="tabs">
        <a href="/console" class={path === '/console' || req ? 'active' : ''}>
          Look up a request
        </a>
        <a href="/console/find" class={path === '/console/find' ? 'active' : ''}>
          Requests
        </a>
        <a href="/console/batches" class={path === '/console/batches' || batch ? 'active' : ''}>
          Batches
        </a>
        <a href="/console/access" class={path === '/console/access' ? 'active' : ''}>
          Access
        </a>
        <a href="/console/reviews" class={path === '/console/reviews' || review ? 'active' : ''}>
          Reviews
        </a>
        <a href="/console/config" class={path === '/console/config' ? 'active' : ''}>
          Configuration
        </a>
        <a href="/console/deploy-callbacks" class={path === '/console/deploy-callbacks' ? 'active' : ''}>
          Deploy callbacks
        </a>
        <a href="/console/unowned" class={path === '/console/unowned' ? 'active' : ''}>
          Expired, not ours
        </a>
        <a href="/console/checks" class={path === '/console/checks' ? 'active' : ''}>
          Checks
        </a>
        <a href="/console/security" class={path === '/console/security' ? 'active' : ''}>
          Security events
        </a>
        <a href="/console/notifications" class={path === '/console/notifications' ? 'active' : ''}>
          Notifications
        </a>
        <a href="/console/runbook" class={path === '/console/runbook' ? 'active' : ''} data-testid="runbook-tab">
          Runbook
        </a>
      </nav>
      {batch ? (
        <BatchDetail key={batch.id} id={batch.id} />
      ) : review ? (
        <ReviewReport key={review.id} id={review.id} />
      ) : path === '/console/reviews' ? (
        <Reviews />
      ) : path === '/console/find' ? (
        <Find />
      ) : path === '/console/batches' ? (
        <Batches />
      ) : path === '/console/access' ? (
        <Access />
      ) : path === '/console/config' ? (
        <Config />
      ) : path === '/console/deploy-callbacks' ? (
        <DeployInbox />
      ) : path === '/console/unowned' ? (
        <Unowned />
      ) : path === '/console/checks' ? (
        <Checks />
      ) : path === '/console/security' ? (
        <SecurityEvents />
      ) : path === '/console/notifications' ? (
        <Notifications />
      ) : path === '/console/runbook' ? (
        <Runbook />
      ) : (
        <Lookup id={req?.id ?? ''} />
      )}
    </section>
  );
}
