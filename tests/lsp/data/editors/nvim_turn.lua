-- Drive `teachback lsp` from a headless Neovim through the README's own configuration (TB_SNIPPET,
-- copied from README.md as written): opening a file starts the server, and the README's <leader>ta
-- keymap asks for a turn. The answer to its prompt comes from TB_INSTRUCTION (vim.ui.input is the
-- hook plugins replace too); what vim.notify shows is collected. Neovim's own "file changed" checks
-- run through FileChangedShell (recorded here instead of a question) and its :write check; every
-- finding goes to TB_RESULT as JSON.
local env = vim.env
local findings = { questions = {}, notes = {} }

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
vim.notify = function(message, level)
  table.insert(findings.notes, { message = message, level = level or vim.log.levels.INFO })
end
vim.ui.input = function(_, on_confirm) on_confirm(env.TB_INSTRUCTION) end

local ok, err = pcall(function()
  vim.cmd("filetype on") -- as in a usual start (-u NONE leaves it off)
  dofile(env.TB_SNIPPET)
  local file = env.TB_FILE
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local function client()
    local attached = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = buf }) or vim.lsp.buf_get_clients(buf)
    for _, found in pairs(attached) do
      if found.name == "teachback" then return found end
    end
  end
  assert(vim.wait(30000, function() return client() ~= nil and client().initialized end, 50),
    "the README's configuration started no teachback client within 30 s")
  findings.rootDir = client().config.root_dir

  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<leader>ta", true, false, true), "mx", false)
  assert(vim.wait(120000, function() return #findings.notes > 0 end, 50), "the keymap showed no result within 120 s")

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
  vim.lsp.stop_client(client().id)
end)
if not ok then findings.error = tostring(err) end

local out = assert(io.open(env.TB_RESULT, "w"))
out:write(vim.fn.json_encode(findings))
out:close()
vim.cmd("qall!")
