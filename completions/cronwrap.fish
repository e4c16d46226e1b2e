# cronwrap completion for fish: cronwrap completion fish > ~/.config/fish/completions/cronwrap.fish
function __cronwrap_complete
    set -l words (commandline -opc) (commandline -ct)
    cronwrap completion fish --cword (math (count $words) - 1) -- $words 2>/dev/null
end
complete -c cronwrap -f -a '(__cronwrap_complete)'
