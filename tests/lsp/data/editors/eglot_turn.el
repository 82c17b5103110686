;;; eglot_turn.el --- drive `teachback lsp' from Emacs through eglot, in batch mode  -*- lexical-binding: t -*-
;; Environment: TB_SERVER (the teachback program), TB_MODEL, TB_DB, TB_FILE (the file to visit),
;; TB_RESULT (where the JSON findings go). Any question Emacs would put to a person is recorded
;; and signalled as an error, so a prompt shows up in the findings instead of hanging the run.

(require 'eglot)
(require 'json)

(defvar tb-questions nil "The questions Emacs tried to ask, in order.")

(defun tb-refuse-question (kind)
  (lambda (&rest args)
    (push (format "%s: %s" kind (car args)) tb-questions)
    (error "teachback test: Emacs asked %s %S" kind (car args))))

(dolist (asker '(yes-or-no-p y-or-n-p ask-user-about-supersession-threat ask-user-about-lock))
  (advice-add asker :override (tb-refuse-question asker)))

;; The README's configuration: no confirmation for the edits the server sends.
(setq eglot-confirm-server-initiated-edits nil)
(add-to-list 'eglot-server-programs
             `(python-mode . (,(getenv "TB_SERVER") "lsp"
                              :initializationOptions (:model ,(getenv "TB_MODEL") :approval "full-auto"
                                                      :db ,(getenv "TB_DB")))))

(defun tb-disk-text (file)
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(let ((findings nil)
      (file (getenv "TB_FILE")))
  (condition-case err
      (progn
        (find-file file)
        (python-mode)
        (apply #'eglot (eglot--guess-contact))
        (let* ((server (eglot-current-server))
               (result (jsonrpc-request
                        server :workspace/executeCommand
                        (list :command "teachback.ask"
                              :arguments (vector (list :instruction "greet with an exclamation mark"
                                                       :uri (eglot--path-to-uri file))))
                        :timeout 120)))
          (push (cons "applied" (eq (plist-get result :applied) t)) findings)
          (push (cons "reason" (plist-get result :reason)) findings))
        (push (cons "buffer" (buffer-substring-no-properties (point-min) (point-max))) findings)
        (push (cons "modified" (and (buffer-modified-p) t)) findings)
        (push (cons "visitedFileCurrent" (and (verify-visited-file-modtime) t)) findings)
        (push (cons "diskAfterTurn" (tb-disk-text file)) findings)
        (save-buffer)
        (push (cons "diskAfterSave" (tb-disk-text file)) findings)
        (push (cons "modifiedAfterSave" (and (buffer-modified-p) t)) findings))
    (error (push (cons "error" (error-message-string err)) findings)))
  (push (cons "questions" (vconcat (reverse tb-questions))) findings)
  (with-temp-file (getenv "TB_RESULT")
    (insert (json-encode findings)))
  (kill-emacs 0))
