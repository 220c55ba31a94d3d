// accmon-dashboard's page: follows /events (server-sent events: the whole state, then changes) and keeps the
// document equal to the state. Every string from the server goes into the document as text (textContent,
// setAttribute), never as markup: an accessory names itself, and a name such as <img src=x onerror=...> must show
// as those characters. The Content-Security-Policy forbids inline script besides.
"use strict";

(() => {
  const hosts = new Map();      // name -> host
  const rows = new Map();       // key -> row
  const rowElements = new Map(); // key -> <tr>
  const rowText = new Map();    // key -> lower-case text the filter searches
  const hostElements = new Map(); // name -> <li>
  // One <tbody> per host, in host order, its rows in connection order: a row added or removed lays out its host's
  // group again, not every row of the table.
  const groups = new Map();     // host name -> {body: <tbody>, connections: sorted connection ids}
  let events = [];
  let maxEvents = 200;
  let clockOffset = 0;          // server time - this browser's time, in seconds
  let terms = [];
  let stream = null;
  let lastMessage = 0;

  const $ = (id) => document.getElementById(id);
  const table = document.getElementById("accessories");
  const eventList = $("events");
  const hostList = $("hosts");
  const filterInput = $("filter");
  const rowKey = (host, connection) => JSON.stringify([host, connection]);
  // The index where `value` goes in the sorted array `list`.
  function position(list, value, before = (a, b) => a < b) {
    let low = 0, high = list.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (before(list[middle], value)) low = middle + 1; else high = middle;
    }
    return low;
  }
  function group(host) {
    let entry = groups.get(host);
    if (!entry) {
      entry = {body: document.createElement("tbody"), connections: []};
      entry.body.setAttribute("data-host-rows", host);
      entry.body.setAttribute("role", "rowgroup");
      const names = [...groups.keys()].sort();
      const next = names[position(names, host)];
      table.insertBefore(entry.body, next === undefined ? null : groups.get(next).body);
      groups.set(host, entry);
    }
    return entry;
  }

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  // --- time --------------------------------------------------------------------------------------------------------
  const now = () => Date.now() / 1000 + clockOffset;
  function ago(seconds) {
    const age = Math.max(0, now() - seconds);
    if (age < 45) return "just now";
    if (age < 90 * 60) return `${Math.round(age / 60)} min ago`;
    if (age < 36 * 3600) return `${Math.round(age / 3600)} h ago`;
    return `${Math.round(age / 86400)} days ago`;
  }
  function timeElement(seconds) {
    if (typeof seconds !== "number") return element("span", "–", "unknown");
    const date = new Date(seconds * 1000);
    const node = element("time", ago(seconds));
    node.dateTime = date.toISOString();
    node.title = date.toLocaleString();
    node.dataset.time = String(seconds);
    return node;
  }
  function refreshTimes() {
    for (const node of document.querySelectorAll("time[data-time]")) node.textContent = ago(Number(node.dataset.time));
  }

  // --- people ------------------------------------------------------------------------------------------------------
  // As accmon prints a Party: "alice (uid 1000, pid 4242, flasher)", "uid 1000" without a name, "ci (remote)".
  function partyText(party) {
    if (!party) return "";
    if (party.remote) return `${party.user || "?"} (remote)`;
    const name = party.user || (party.uid !== undefined ? `uid ${party.uid}` : "?");
    const details = [];
    if (party.uid !== undefined && party.user) details.push(`uid ${party.uid}`);
    if (party.pid) details.push(`pid ${party.pid}`);
    if (party.client) details.push(party.client);
    return details.length ? `${name} (${details.join(", ")})` : name;
  }

  // --- hosts -------------------------------------------------------------------------------------------------------
  function renderHost(host) {
    let item = hostElements.get(host.name);
    if (!item) {
      item = element("li", null, "host-card");
      hostElements.set(host.name, item);
      const names = [...hostElements.keys()].sort();
      const next = names[names.indexOf(host.name) + 1];
      hostList.insertBefore(item, next === undefined ? null : hostElements.get(next));
    }
    item.replaceChildren();
    item.dataset.state = host.state;
    const button = element("button", host.name, "host-name");
    button.type = "button";
    button.title = `Show only ${host.name}'s accessories and events`;
    button.setAttribute("aria-pressed", String(terms.length === 1 && terms[0] === host.name.toLowerCase()));
    button.addEventListener("click", () => setFilter(filterInput.value.trim() === host.name ? "" : host.name));
    const status = element("span", host.state === "online" || host.state === "stale" ? host.state : "offline", "state");
    status.setAttribute("data-host-status", host.name);
    item.append(button, status);
    const since = element("span", null, "since");
    if (typeof host.since === "number") since.append("since ", timeElement(host.since));
    else if (host.state !== "online") since.append("since before the dashboard started");
    item.append(since);
    if (host.reason) item.append(element("span", host.reason, "reason"));
    item.append(element("span", "", "host-count"));
    const rowsOfHost = groups.get(host.name);
    if (rowsOfHost) {
      for (const tr of rowsOfHost.body.children) tr.classList.toggle("stale", host.state !== "online");
    }
  }
  function countHosts() {
    const counts = new Map();
    for (const row of rows.values()) counts.set(row.host, (counts.get(row.host) || 0) + 1);
    for (const [name, item] of hostElements) {
      const count = counts.get(name) || 0;
      item.querySelector(".host-count").textContent = `${count} ${count === 1 ? "accessory" : "accessories"}`;
    }
    const online = [...hosts.values()].filter((h) => h.state === "online").length;
    $("host-count").textContent = `${online} of ${hosts.size} online`;
  }

  // --- rows --------------------------------------------------------------------------------------------------------
  function renderRow(row, tr) {
    tr.replaceChildren();
    tr.setAttribute("role", "row");
    tr.setAttribute("data-host", row.host);
    tr.setAttribute("data-connection", String(row.connectionID));
    tr.setAttribute("data-kind", row.kind);
    const host = hosts.get(row.host);
    tr.classList.toggle("stale", !host || host.state !== "online");
    // Not read back from the broker while its host counts it: perhaps gone, not confirmed (docs/MQTT.md section 5).
    tr.classList.toggle("unconfirmed", !!row.unconfirmed);
    if (row.unconfirmed) tr.title = "unconfirmed: not read back from the broker, perhaps gone";
    else tr.removeAttribute("title");
    const usbID = row.vendorID || row.productID ? `${row.vendorID || "-"}:${row.productID || "-"}` : "";
    const id = element("td", null, "col-id");
    id.append(element("span", usbID || "–"), element("small", row.accessoryID));
    const claim = row.claim;
    const cells = [
      ["Host", element("td", row.host, "col-host")],
      ["Kind", element("td", row.kind, "col-kind")],
      ["ID", id],
      ["Name", element("td", row.name || "–", "col-name")],
      ["Serial", element("td", row.serialNumber || "–", "col-serial")],
      ["Nodes", element("td", (row.deviceNodes || []).join(", ") || "–", "col-nodes")],
      ["Holder", element("td", claim ? partyText(claim.holder) || "?" : "–", "col-holder")],
      ["Since", element("td", null, "col-since")],
    ];
    if (claim && typeof claim.since === "number") cells[7][1].append(timeElement(claim.since));
    else cells[7][1].textContent = "–";
    if (claim && claim.reason) cells[6][1].title = claim.reason;
    if (claim && claim.waiting) cells[6][1].append(element("small", `${claim.waiting} waiting`));
    for (const [label, cell] of cells) {
      cell.dataset.label = label;
      cell.setAttribute("role", "cell");
      tr.append(cell);
    }
    const holder = claim ? `${partyText(claim.holder)} ${claim.reason || ""}` : "";
    rowText.set(rowKey(row.host, row.connectionID), [row.host, row.kind, usbID, row.accessoryID, row.name,
      row.serialNumber, row.manufacturer, (row.deviceNodes || []).join(" "), holder].join(" ").toLowerCase());
  }
  function setRow(row) {
    const key = rowKey(row.host, row.connectionID);
    let tr = rowElements.get(key);
    if (!tr) {
      tr = document.createElement("tr");
      rowElements.set(key, tr);
      const entry = group(row.host);
      const index = position(entry.connections, row.connectionID);
      entry.connections.splice(index, 0, row.connectionID);
      const next = entry.connections[index + 1];
      entry.body.insertBefore(tr, next === undefined ? null : rowElements.get(rowKey(row.host, next)));
    }
    rows.set(key, row);
    renderRow(row, tr);
    tr.hidden = !matches(rowText.get(key));
  }
  function removeRow(host, connection) {
    const key = rowKey(host, connection);
    const tr = rowElements.get(key);
    if (tr) tr.remove();
    rowElements.delete(key);
    rows.delete(key);
    rowText.delete(key);
    const entry = groups.get(host);
    if (entry) {
      const index = position(entry.connections, connection);
      if (entry.connections[index] === connection) entry.connections.splice(index, 1);
      if (entry.connections.length === 0) { entry.body.remove(); groups.delete(host); }
    }
  }

  // --- events ------------------------------------------------------------------------------------------------------
  function eventItem(event) {
    const item = element("li", null, "event");
    item.dataset.kind = event.kind;
    item.append(timeElement(event.time), element("span", event.host, "event-host"),
      element("span", event.kind, "event-kind"));
    const accessory = event.accessory;
    if (accessory) {
      const id = accessory.vendorID ? `${accessory.vendorID}:${accessory.productID}` : accessory.accessoryID;
      const serial = accessory.serialNumber ? `, serial ${accessory.serialNumber}` : "";
      item.append(element("span", `${accessory.name || accessory.kind} (${id}${serial}, connection ` +
        `${accessory.connectionID})`, "event-what"));
    }
    if (event.actor) item.append(element("span", `by ${partyText(event.actor)}`, "event-who"));
    if (event.holder) item.append(element("span", `holder ${partyText(event.holder)}`, "event-who"));
    if (event.reason) item.append(element("span", event.reason, "reason"));
    item.dataset.text = [event.host, event.kind, accessory ? [accessory.name, accessory.accessoryID,
      accessory.serialNumber, accessory.kind].join(" ") : "", partyText(event.actor), partyText(event.holder),
      event.reason || ""].join(" ").toLowerCase();
    item.hidden = !matches(item.dataset.text);
    return item;
  }
  function addEvents(list) {
    for (const event of list) {
      events.push(event);
      eventList.prepend(eventItem(event));
    }
    while (events.length > maxEvents) {
      events.shift();
      eventList.lastElementChild.remove();
    }
  }

  // --- the filter --------------------------------------------------------------------------------------------------
  function matches(text) { return terms.every((term) => text.includes(term)); }
  function applyFilter() {
    terms = filterInput.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const [key, tr] of rowElements) tr.hidden = !matches(rowText.get(key));
    for (const item of eventList.children) item.hidden = !matches(item.dataset.text);
    for (const [name, item] of hostElements) {
      item.querySelector(".host-name").setAttribute("aria-pressed",
        String(terms.length === 1 && terms[0] === name.toLowerCase()));
    }
    counts();
  }
  function setFilter(value) {
    filterInput.value = value;
    history.replaceState(null, "", value ? `#filter=${encodeURIComponent(value)}` : location.pathname);
    applyFilter();
  }
  function counts() {
    const shown = [...rowElements.values()].filter((tr) => !tr.hidden).length;
    $("accessory-count").textContent = shown === rows.size ? `${rows.size}` : `${shown} of ${rows.size}`;
    $("no-rows").hidden = shown > 0 || rows.size === 0;
    $("event-count").textContent = `${events.length}`;
    countHosts();
  }

  // --- the stream --------------------------------------------------------------------------------------------------
  function showSource(source, live) {
    const banner = $("connection");
    let state = source ? source.state : "connecting";
    let text;
    if (!live) { state = "connecting"; text = "Connection to the dashboard lost: reconnecting…"; }
    else if (state === "connected") text = "Live";
    else if (state === "reconnecting") text = `The reader lost the broker: ${source.message}`;
    else if (state === "down") text = `The reader stopped: ${source.message}`;
    else text = "Starting: waiting for the first state…";
    banner.dataset.state = state;
    banner.textContent = text;
  }
  function applyState(state) {
    clockOffset = state.now - Date.now() / 1000;
    maxEvents = state.maxEvents || 200;
    document.title = state.title;
    $("title").textContent = state.title;
    $("mode").textContent = state.view || state.mode;
    hosts.clear(); rows.clear(); rowElements.clear(); rowText.clear(); hostElements.clear();
    events = [];
    for (const entry of groups.values()) entry.body.remove();
    groups.clear();
    hostList.replaceChildren(); eventList.replaceChildren();
    for (const host of state.hosts) hosts.set(host.name, host);
    for (const host of state.hosts) renderHost(host);
    const fragment = document.createDocumentFragment();
    const sorted = [...state.rows].sort((a, b) =>
      a.host < b.host ? -1 : a.host > b.host ? 1 : a.connectionID - b.connectionID);
    for (const row of sorted) {
      const key = rowKey(row.host, row.connectionID);
      const tr = document.createElement("tr");
      rows.set(key, row); rowElements.set(key, tr);
      renderRow(row, tr);
      tr.hidden = !matches(rowText.get(key));
      let entry = groups.get(row.host);
      if (!entry) {
        entry = {body: document.createElement("tbody"), connections: []};
        entry.body.setAttribute("data-host-rows", row.host);
        entry.body.setAttribute("role", "rowgroup");
        groups.set(row.host, entry);
        fragment.append(entry.body);
      }
      entry.connections.push(row.connectionID);
      entry.body.append(tr);
    }
    table.append(fragment);
    addEvents(state.events);
    showSource(state.source, true);
    counts();
    performance.mark("accmon:state-rendered");
  }
  function applyDelta(delta) {
    for (const host of delta.hosts) { hosts.set(host.name, host); renderHost(host); }
    for (const [host, connection] of delta.removedRows) removeRow(host, connection);
    for (const row of delta.rows) setRow(row);
    if (delta.eventsReset) { events = []; eventList.replaceChildren(); addEvents(delta.eventsReset); }
    addEvents(delta.events);
    if (delta.source) showSource(delta.source, true);
    counts();
  }
  function connect() {
    if (stream) stream.close();
    stream = new EventSource("/events");
    lastMessage = Date.now();
    stream.addEventListener("state", (message) => { lastMessage = Date.now(); applyState(JSON.parse(message.data)); });
    stream.addEventListener("delta", (message) => { lastMessage = Date.now(); applyDelta(JSON.parse(message.data)); });
    stream.addEventListener("ping", () => { lastMessage = Date.now(); });
    stream.onerror = () => {
      showSource(null, false);
      // The browser retries by itself unless the stream was refused (an error status): then try again here.
      if (stream.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
    };
  }
  // A stream that stays silent past three pings (one every 15 s) is dead even if the socket does not say so.
  setInterval(() => { if (Date.now() - lastMessage > 50000) connect(); }, 5000);
  setInterval(refreshTimes, 15000);

  // --- keyboard ----------------------------------------------------------------------------------------------------
  document.addEventListener("keydown", (event) => {
    const typing = event.target instanceof HTMLInputElement;
    if (event.key === "/" && !typing) { event.preventDefault(); filterInput.focus(); filterInput.select(); }
    if (event.key === "Escape" && event.target === filterInput) setFilter("");
  });
  let pending = 0;
  filterInput.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(() => setFilter(filterInput.value), 80);
  });
  // The filter in the address (#filter=...): read at load and when the address changes (a bookmark, a link).
  const filterFromAddress = () => location.hash.startsWith("#filter=") ? decodeURIComponent(location.hash.slice(8)) : "";
  window.addEventListener("hashchange", () => setFilter(filterFromAddress()));
  filterInput.value = filterFromAddress();
  terms = filterInput.value.toLowerCase().split(/\s+/).filter(Boolean);
  connect();
})();
