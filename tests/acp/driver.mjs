// An editor on the official ACP TypeScript library (@agentclientprotocol/sdk): reads a plan as JSON
// on stdin, spawns `teachback acp` as an editor would, runs the plan and prints what it saw as one
// JSON line. The plan and the transcript are those of py_driver.py (the Python library's client).
import { spawn } from "node:child_process";
import { openSync, readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const plan = JSON.parse(readFileSync(0, "utf8"));
const transcript = { loadUpdates: [], turns: [], permissions: [], reads: [], writes: [], modeUpdates: [] };
const answers = [...(plan.answers ?? [])];
const buffers = { ...(plan.buffers ?? {}) };
let sink = transcript.loadUpdates;
let onToolCall = () => {};
let firstUpdate = null;

const stderr = openSync(plan.stderr, "a");
const child = spawn(plan.command[0], plan.command.slice(1), {
  cwd: plan.cwd,
  env: plan.env,
  stdio: ["pipe", "pipe", stderr],
});

const editor = acp
  .client({ name: "teachback-tests" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    firstUpdate ??= performance.now();
    sink.push(params.update);
    if (params.update.sessionUpdate === "tool_call") onToolCall();
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const chose = answers.shift() ?? "reject_once";
    transcript.permissions.push({ toolCall: params.toolCall, options: params.options, chose });
    return { outcome: { outcome: "selected", optionId: chose } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    transcript.reads.push(params.path);
    if (params.path in buffers) return { content: buffers[params.path] };
    try {
      return { content: readFileSync(params.path, "utf8") };
    } catch {
      throw acp.RequestError.resourceNotFound(params.path);
    }
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    transcript.writes.push(params.path);
    writeFileSync(params.path, params.content); // the buffer, saved, as an editor does
    delete buffers[params.path];
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

await editor.connectWith(stream, async (agent) => {
  const started = performance.now();
  transcript.initialize = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: plan.fs, writeTextFile: plan.fs } },
    clientInfo: { name: "teachback-tests", version: "1" },
  });
  transcript.initializeMs = performance.now() - started;
  let sessionId = plan.load;
  if (sessionId) {
    await agent.request(acp.methods.agent.session.load, { cwd: plan.cwd, sessionId, mcpServers: [] });
  } else {
    const mcpServers = plan.mcpServers ?? [];
    transcript.newSession = await agent.request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers });
    ({ sessionId } = transcript.newSession);
  }
  transcript.sessionId = sessionId;
  for (const text of plan.prompts) {
    if (typeof text === "object") {
      // a step that is not a prompt: the editor's mode picker sets a mode between turns
      sink = transcript.modeUpdates;
      await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: text.setMode });
      continue;
    }
    const turn = { updates: [] };
    sink = turn.updates;
    firstUpdate = null;
    let seen = 0;
    onToolCall = () => {
      seen += 1;
      if (plan.cancelAfterToolCalls != null && seen === plan.cancelAfterToolCalls) {
        agent.notify(acp.methods.agent.session.cancel, { sessionId });
      }
    };
    const turnStarted = performance.now();
    const response = await agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    turn.ms = performance.now() - turnStarted;
    turn.firstUpdateMs = firstUpdate === null ? null : firstUpdate - turnStarted;
    turn.stopReason = response.stopReason;
    transcript.turns.push(turn);
  }
});

child.stdin.end(); // the editor closes the agent as it quits
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify(transcript) + "\n");
