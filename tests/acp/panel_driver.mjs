// An editor's agent panel on the official ACP TypeScript library (@agentclientprotocol/sdk), with the
// features a panel shows only when the agent provides them: terminals the editor runs commands in,
// the session history (session/list, session/resume, session/load), usage and slash commands.
// Reads a plan as JSON on stdin, spawns `teachback acp`, runs the plan's steps and prints what it saw
// as one JSON line.
//
// Plan: command, env, cwd, stderr (the agent's log), terminal (offer terminal/*), terminalAnswers
// ("real": run the command; "stop": the user stops it in the editor; "bad-create", "bad-output",
// "bad-exit": malformed answers), steps: [{do: "new"} | {do: "prompt", text} | {do: "list"} |
// {do: "resume", sessionId} | {do: "load", sessionId}].
// Transcript: initialize, sessionId, steps (each step's answer, or its error, and the updates sent
// during it), terminals (each terminal/create request, its output, how it ended, whether the agent
// killed and released it).
import { spawn } from "node:child_process";
import { openSync, readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const plan = JSON.parse(readFileSync(0, "utf8"));
const transcript = { steps: [], terminals: [] };
const terminals = new Map();
let updates = [];

const stderr = openSync(plan.stderr, "a");
const agentProcess = spawn(plan.command[0], plan.command.slice(1), {
  cwd: plan.cwd,
  env: plan.env,
  stdio: ["pipe", "pipe", stderr],
});

// A terminal as an editor runs one: the process, its output so far, how it ended.
function createTerminal(params) {
  const record = { request: params, output: "", exit: null };
  transcript.terminals.push(record);
  const id = `term-${transcript.terminals.length}`;
  const env = { ...process.env };
  for (const { name, value } of params.env ?? []) env[name] = value;
  const child = spawn(params.command, params.args ?? [], { cwd: params.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      record.exit = { exitCode: code, signal };
      resolve(record.exit);
    });
  });
  const took = (chunk) => {
    record.output += chunk;
    // the user reads the first output in the panel and presses stop
    if (plan.terminalAnswers === "stop" && !record.exit) child.kill("SIGTERM");
  };
  child.stdout.on("data", took);
  child.stderr.on("data", took);
  terminals.set(id, { child, record, exited });
  return id;
}

const answers = plan.terminalAnswers ?? "real";
const editor = acp
  .client({ name: "teachback-panel-tests" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, async () => ({
    outcome: { outcome: "selected", optionId: "allow_once" },
  }))
  .onRequest(acp.methods.client.terminal.create, async ({ params }) => {
    const terminalId = createTerminal(params);
    return answers === "bad-create" ? { terminalId: 42 } : { terminalId };
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
    const exit = await terminals.get(params.terminalId).exited;
    return answers === "bad-exit" ? { exitCode: "zero", signal: 9 } : exit;
  })
  .onRequest(acp.methods.client.terminal.output, async ({ params }) => {
    const { record } = terminals.get(params.terminalId);
    if (answers === "bad-output") return { output: 7 };
    const status = record.exit && answers !== "bad-exit" ? { exitStatus: record.exit } : {};
    return { output: record.output, truncated: false, ...status };
  })
  .onRequest(acp.methods.client.terminal.kill, async ({ params }) => {
    const terminal = terminals.get(params.terminalId);
    if (terminal) terminal.record.killed = true;
    terminal?.child.kill("SIGKILL");
    return {};
  })
  .onRequest(acp.methods.client.terminal.release, async ({ params }) => {
    const terminal = terminals.get(params.terminalId);
    if (terminal) {
      terminal.record.released = true;
      if (!terminal.record.exit) terminal.child.kill("SIGKILL");
    }
    terminals.delete(params.terminalId);
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));

async function step(agent, s) {
  if (s.do === "new") {
    const answer = await agent.request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
    transcript.sessionId = answer.sessionId;
    return answer;
  }
  if (s.do === "prompt") {
    const prompt = [{ type: "text", text: s.text }];
    return agent.request(acp.methods.agent.session.prompt, { sessionId: transcript.sessionId, prompt });
  }
  if (s.do === "list") return agent.request(acp.methods.agent.session.list, { cwd: plan.cwd });
  if (s.do === "resume" || s.do === "load") {
    const method = s.do === "resume" ? acp.methods.agent.session.resume : acp.methods.agent.session.load;
    transcript.sessionId = s.sessionId;
    return agent.request(method, { cwd: plan.cwd, sessionId: s.sessionId, mcpServers: [] });
  }
  throw new Error(`unknown step ${s.do}`);
}

await editor.connectWith(stream, async (agent) => {
  transcript.initialize = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: plan.terminal },
    clientInfo: { name: "teachback-panel-tests", version: "1" },
  });
  for (const s of plan.steps) {
    updates = [];
    const seen = { do: s.do };
    try {
      seen.answer = await step(agent, s);
    } catch (error) {
      seen.error = { message: String(error?.message ?? error), data: error?.data ?? null };
    }
    await new Promise((resolve) => setTimeout(resolve, 200)); // updates sent right after an answer
    seen.updates = updates;
    transcript.steps.push(seen);
  }
});

agentProcess.stdin.end(); // the editor closes the agent as it quits
await new Promise((resolve) => agentProcess.on("exit", resolve));
for (const record of transcript.terminals) record.output = record.output.slice(-4000);
process.stdout.write(JSON.stringify(transcript) + "\n");
