// Drives the web console of `switchyard serve` in headless Chromium (run by
// tests/console_chromium.sh, which starts the server and passes its address).
//
// GIVEN the console at CONSOLE_BASE, WHEN a question is asked in the page, THEN its answer and
// its timeline (route with alternatives, one bar per dispatch, synthesis, final) appear, the
// recent-queries list and the routing table show it, hostile text stays text, nothing is
// loaded from anywhere but the server, and a screenshot is saved to SCREENSHOT.
"use strict";
const assert = require("node:assert/strict");
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = process.env.CONSOLE_BASE;
let passed = 0;
let failed = 0;

async function check(name, body) {
  try {
    await body();
    passed += 1;
    console.log(`console: ok - ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`console: FAILED - ${name}\n${e.stack || e}`);
  }
}

(async () => {
  const context = await chromium.launchPersistentContext(process.env.PROFILE_DIR, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 1100 },
  });
  const page = context.pages()[0] || (await context.newPage());
  const foreign = [];
  const consoleErrors = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });

  try {
    await page.goto(base + "/");

    await check("the routing table lists every intent with its agents, tiers and timeouts", async () => {
      await page.waitForSelector("#routes tr[data-intent='gap_analysis']", { timeout: 10000 });
      const row = await page.textContent("#routes tr[data-intent='gap_analysis']");
      assert.match(row, /gap_analyzer/);
      assert.match(row, /primary/);
      assert.match(row, /T2/);
      assert.match(row, /\d+ ms/);
      const intents = await page.$$eval("#routes tr[data-intent]", (rows) => new Set(rows.map((r) => r.dataset.intent)).size);
      assert.ok(intents >= 5, `only ${intents} intents in the table`);
    });

    let queryId = null;
    await check("a question asked in the page shows its answer", async () => {
      await page.fill("#user", "console-test-user");
      await page.dispatchEvent("#user", "change");
      await page.fill("#session", "console-session-1");
      await page.fill("#question", "Which regions are underperforming against benchmark on market share?");
      await page.click("#ask-button");
      await page.waitForSelector("#answer-panel:not([hidden])", { timeout: 30000 });
      const text = (await page.textContent("#answer-text")).trim();
      assert.ok(text.length > 20, `answer text: ${JSON.stringify(text)}`);
      assert.equal((await page.textContent("#answer-status")).trim(), "success");
      assert.match(await page.textContent("#answer-band"), /high|caveated|partial|clarify/);
      queryId = (await page.textContent("#timeline-id")).trim();
      assert.match(queryId, /^[0-9a-f-]{36}$/);
    });

    await check("the timeline shows the route, each dispatch on its tier, the synthesis and the end", async () => {
      const route = await page.$("#route .lane[data-kind='route'][data-intent='gap_analysis']");
      assert.ok(route, "no route row for gap_analysis");
      const alternatives = await page.$$eval("#route .alt", (a) => a.length);
      assert.ok(alternatives >= 2, `${alternatives} alternatives shown`);
      const lanes = await page.$$eval("#timeline .lane[data-kind='dispatch']", (ls) =>
        ls.map((l) => ({ agent: l.dataset.agent, status: l.dataset.status, label: l.querySelector(".label").textContent,
          width: l.querySelector(".bar").getBoundingClientRect().width })));
      const agents = lanes.map((l) => l.agent).sort();
      assert.deepEqual(agents, ["gap_analyzer", "resource_optimizer"]);
      for (const l of lanes) {
        assert.equal(l.status, "success", JSON.stringify(l));
        assert.match(l.label, /^T\d/, JSON.stringify(l));
        assert.ok(l.width >= 3, `a bar is drawn for ${l.agent}`);
      }
      assert.ok(await page.$("#timeline .lane[data-kind='synthesis'][data-status='success']"), "no synthesis row");
      assert.match(await page.textContent("#timeline .lane[data-kind='final']"), /success in \d+ ms/);
    });

    await check("the recent-queries list shows the question", async () => {
      await page.waitForSelector(`#recent li[data-query-id='${queryId}']`, { timeout: 10000 });
      assert.match(await page.textContent(`#recent li[data-query-id='${queryId}']`), /underperforming against benchmark/);
    });

    await check("hostile text in a question is shown as text, never run", async () => {
      await page.fill("#question", "Where are the gaps <img src=x onerror=\"window.__owned=1\"> in market share?");
      await page.click("#ask-button");
      await page.waitForFunction(() => [...document.querySelectorAll("#recent li .q")].some((q) => q.textContent.includes("<img")), null, { timeout: 30000 });
      assert.equal(await page.evaluate(() => window.__owned), undefined);
      assert.equal(await page.$$eval("#recent img, #timeline img, #answer-panel img", (i) => i.length), 0);
    });

    await check("a refused question shows the error and the field", async () => {
      await page.fill("#question", "x".repeat(5000));
      await page.click("#ask-button");
      await page.waitForFunction(() => document.querySelector("#ask-status").className === "error", null, { timeout: 10000 });
      assert.match(await page.textContent("#ask-status"), /^400 invalid_input: query/);
    });

    await check("the page loads nothing from elsewhere and logs no error", async () => {
      assert.deepEqual(foreign, []);
      assert.deepEqual(consoleErrors.filter((e) => !/status of 400/.test(e)), []);
    });

    // Show the first query again for the artifact.
    await page.fill("#question", "Which regions are underperforming against benchmark on market share?");
    await page.evaluate(() => { document.querySelector("#ask-status").textContent = ""; });
    await page.click(`#recent li[data-query-id='${queryId}']`);
    await page.waitForSelector("#answer-panel:not([hidden])", { timeout: 30000 });
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
    console.log(`console: screenshot saved to ${process.env.SCREENSHOT}`);

    // Faults on the timeline: the scripted manifest's agents fail, hang and fall back.
    const scripted = process.env.SCRIPTED_BASE;
    await page.goto(scripted + "/");
    await page.fill("#user", "console-test-user");
    // Wait for THIS question's timeline to end: until the new query is followed, the previous
    // query's answer and final lane are still on the page.
    const askAndWait = async (question) => {
      const before = await page.$eval("#timeline-id", (e) => e.textContent).catch(() => "");
      await page.fill("#question", question);
      await page.click("#ask-button");
      await page.waitForFunction((prev) => {
        const id = document.querySelector("#timeline-id");
        const panel = document.querySelector("#answer-panel");
        return id && id.textContent && id.textContent !== prev && panel && !panel.hidden
          && document.querySelector("#timeline .lane[data-kind='final']");
      }, before, { timeout: 30000 });
    };
    const lane = (agent) => page.$eval(`#timeline .lane[data-kind='dispatch'][data-agent='${agent}']`, (l) => ({
      status: l.dataset.status, label: l.querySelector(".label").textContent,
      retries: [...l.querySelectorAll(".mark.retry")].map((m) => m.title),
      fallbacks: [...l.querySelectorAll(".mark.fallback")].map((m) => m.title),
    }));

    await check("retries and the fallback of a failing agent are marked on its lane", async () => {
      await askAndWait("charlie broken question");
      const broken = await lane("broken");
      assert.equal(broken.retries.length, 2, JSON.stringify(broken));
      assert.match(broken.retries[0], /attempt 1 failed/);
      assert.equal(broken.fallbacks.length, 1, JSON.stringify(broken));
      assert.match(broken.fallbacks[0], /fallback to rescuer/);
      const rescuer = await lane("rescuer");
      assert.equal(rescuer.status, "success");
      assert.match(rescuer.label, /^T5\s*rescuer fallback/);
    });

    await check("a hanging agent's timeouts are marked, and its fallback answers", async () => {
      await askAndWait("delta sleepy question");
      const sleepy = await lane("sleepy");
      assert.ok(sleepy.retries.length >= 1, JSON.stringify(sleepy));
      assert.ok(sleepy.retries.every((t) => /timeout/.test(t)), JSON.stringify(sleepy));
      assert.equal(sleepy.fallbacks.length, 1, JSON.stringify(sleepy));
      assert.equal((await lane("rescuer")).status, "success");
      await page.screenshot({ path: process.env.SCREENSHOT_FAULTS, fullPage: true });
    });
  } finally {
    await context.close();
  }
  console.log(`console: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
})().catch((e) => {
  console.log(`console: FAILED - ${e.stack || e}`);
  process.exit(1);
});
