-- Drive `teachback lsp` from Neovim (0.7+ APIs), headless. Environment as for eglot_turn.el.
-- Neovim's own "file changed" checks run through FileChangedShell (recorded here instead of a
-- question) and its :write check; every finding goes to TB_RESULT as JSON.
local env = vim.env
local findings = { questions = {} }

local function disk_text(path)
  local handle = assert(io.open(path, "rb"))
  local text = handle:read("*a")
  handle:close()
  return text
end

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, true), "\n") .. "\n"
end

vim.api.nvim_create_autocmd("FileChangedShell", {
  callback = function()
    table.insert(findings.questions, "FileChangedShell: " .. vim.v.fcs_reason)
    vim.v.fcs_choice = ""
  end,
})

local ok, err = pcall(function()
  local file = env.TB_FILE
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local ready = false
  local client_id = vim.lsp.start_client({
    name = "teachback",
    cmd = { env.TB_SERVER, "lsp" },
    root_dir = vim.fn.fnamemodify(file, ":h"),
    init_options = { model = env.TB_MODEL, approval = "full-auto", db = env.TB_DB },
    on_init = function() ready = true end,
  })
  assert(client_id, "the language server did not start")
  vim.lsp.buf_attach_client(buf, client_id)
  assert(vim.wait(30000, function() return ready end, 50), "no answer to initialize within 30 s")
  local client = vim.lsp.get_client_by_id(client_id)

  local answer
  client.request("workspace/executeCommand", {
    command = "teachback.ask",
    arguments = { { instruction = "greet with an exclamation mark", uri = vim.uri_from_bufnr(buf) } },
  }, function(request_err, result) answer = { err = request_err, result = result } end, buf)
  assert(vim.wait(120000, function() return answer ~= nil end, 50), "no answer to teachback.ask within 120 s")
  assert(answer.err == nil, "teachback.ask failed: " .. vim.inspect(answer.err))
  findings.applied = answer.result.applied
  findings.reason = answer.result.reason

  findings.buffer = buffer_text(buf)
  findings.modified = vim.bo[buf].modified
  findings.diskAfterTurn = disk_text(file)
  vim.cmd("checktime") -- what Neovim runs on focus and after shell commands
  -- :write would ask "The file has been changed since reading it!!! Do you really want to write
  -- to it (y/n)?" and wait for an answer that never comes: stop here instead.
  assert(#findings.questions == 0, "Neovim found the file changed under its buffer: " .. table.concat(findings.questions, "; "))
  vim.cmd("write")
  findings.diskAfterSave = disk_text(file)
  findings.modifiedAfterSave = vim.bo[buf].modified
  vim.lsp.stop_client(client_id)
end)
if not ok then findings.error = tostring(err) end

local out = assert(io.open(env.TB_RESULT, "w"))
out:write(vim.fn.json_encode(findings))
out:close()
vim.cmd("qall!")
