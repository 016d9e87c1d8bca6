// The dashboard's entry point: tabs between the live view and the playground.
import { startLive } from '/ui/live.js';
import { startPlayground } from '/ui/playground.js';

/** Shows the view called `name` ("live" or "playground") and marks its tab. */
function show(name) {
  for (const tab of document.querySelectorAll('.tab')) {
    tab.setAttribute('aria-selected', String(tab.dataset.view === name));
  }
  for (const panel of document.querySelectorAll('[data-panel]')) {
    panel.hidden = panel.dataset.panel !== name;
  }
  document.body.dataset.view = name;
  // "live · updated …" is the live view's: the playground polls nothing.
  document.getElementById('status').hidden = name !== 'live';
}

for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', () => {
    history.replaceState(null, '', `#${tab.dataset.view}`);
    show(tab.dataset.view);
  });
}
show(location.hash === '#playground' ? 'playground' : 'live');
startLive();
startPlayground();
