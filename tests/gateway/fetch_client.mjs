// The gateway from Node's own fetch (no SDK): a plain answer, a blocked one, a stream, a malformed body.
// Prints one JSON object; tests/gateway/test_gateway.py asserts on it. GATEWAY_URL and CHUNKS come from the env.
const url = `${process.env.GATEWAY_URL}/v1/chat/completions`;
const chunks = JSON.parse(process.env.CHUNKS);
const messages = [{ role: "user", content: "When does the ferry leave Arden?" }];
const post = (body) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

const out = {};
let r = await post({ model: "good", messages, citelock: { chunks } });
let j = await r.json();
out.plain = { status: r.status, decision: r.headers.get("x-citelock-decision"), citelock_decision: j.citelock.result.decision };

r = await post({ model: "fabricate", messages, citelock: { chunks } });
j = await r.json();
out.blocked = { status: r.status, type: j.error.type, code: j.error.code };

r = await post({ model: "good", messages, stream: true, citelock: { chunks, surface: "support" } });
const reader = r.body.getReader();
const decoder = new TextDecoder();
let buffer = "", text = "", done = false, decision = null;
for (;;) {
  const { value, done: end } = await reader.read();
  if (end) break;
  buffer += decoder.decode(value, { stream: true });
  let at;
  while ((at = buffer.indexOf("\n\n")) >= 0) {
    const event = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    if (!event.startsWith("data: ")) continue;
    const data = event.slice(6);
    if (data === "[DONE]") { done = true; continue; }
    const chunk = JSON.parse(data);
    text += chunk.choices[0].delta.content ?? "";
    if (chunk.choices[0].finish_reason) decision = chunk.citelock.result.decision;
  }
}
out.stream = { done, decision, text };

r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{nope" });
j = await r.json();
out.badjson = { status: r.status, has_error: typeof j.error?.message === "string" };
console.log(JSON.stringify(out));
