#compdef reachctl

__reachctl_complete() {
    local -ar non_empty_completions=("${@:#(|:*)}")
    local -ar empty_completions=("${(M)@:#(|:*)}")
    _describe -V '' non_empty_completions -- empty_completions -P $'\'\''
}

__reachctl_custom_complete() {
    local -a completions
    completions=("${(@f)"$("${command_name}" "${@}" "${command_line[@]}")"}")
    if [[ "${#completions[@]}" -gt 1 ]]; then
        __reachctl_complete "${completions[@]:0:-1}"
    fi
}

__reachctl_cursor_index_in_current_word() {
    if [[ -z "${QIPREFIX}${IPREFIX}${PREFIX}" ]]; then
        printf 0
    else
        printf %s "${#${(z)LBUFFER}[-1]}"
    fi
}

_reachctl() {
    emulate -RL zsh -G
    setopt extendedglob nullglob numericglobsort
    unsetopt aliases banghist

    local -xr SAP_SHELL=zsh
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(builtin emulate zsh -c 'printf %s "${ZSH_VERSION}"')"
    local -r SAP_SHELL_VERSION

    local context state state_descr line
    local -A opt_args

    local -r command_name="${words[1]}"
    local -ar command_line=("${words[@]}")
    local -ir current_word_index="$((CURRENT - 1))"

    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'status:Show the internet'\''s reachability (the default command).'
            'query:Show the reachability of each TARGET once.'
            'watch:Show each TARGET'\''s reachability, then a line for every change, until interrupted.'
            'wait:Wait until every TARGET is reachable (without one: the internet), then exit.'
            'list:Show the targets reachabilityd watches for your user (for every user, as root), with their state.'
            'doctor:Check the installed service: its files, the bus'\''s policy and activation, and an answer.'
            'metrics:Print reachabilityd'\''s metrics (Prometheus text format); root and the adm group only.'
            'follow-units:Start and stop reachability-online.target and reachability-unmetered.target as the internet comes and goes.'
            'help:Show subcommand help information.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        status|query|watch|wait|list|doctor|metrics|follow-units|help)
            "_reachctl_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_reachctl_status() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_query() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '*:targets:'
        '--from[A local address\: answer for packets from it (ip route get TARGET from LOCAL; each TARGET an address literal); with no TARGET, whether LOCAL is configured on a link that can carry packets.]:local:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_watch() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '*:targets:'
        '--from[A local address\: answer for packets from it (ip route get TARGET from LOCAL; each TARGET an address literal); with no TARGET, whether LOCAL is configured on a link that can carry packets.]:local:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_wait() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '*:targets:'
        '--any[Return when any one TARGET is reached, not every one.]'
        '(-4 --ipv4)'{-4,--ipv4}'[Reachable over IPv4.]'
        '(-6 --ipv6)'{-6,--ipv6}'[Reachable over IPv6.]'
        '--unmetered[On a connection that is not metered.]'
        '--full[With full connectivity (NetworkManager'\''s check), not only a route.]'
        '--timeout[Give up after this long (0\: wait forever).]:seconds:'
        '(-q --quiet)'{-q,--quiet}'[Print nothing; the exit status says it.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_list() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_doctor() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_metrics() {
    local -i ret=1
    local -ar arg_specs=(
        '--textfile[Keep FILE up to date instead of printing once.]:FILE:'
        '--liveness[With --textfile\: rewrite FILE at least this often, with the time in reachctl_textfile_updated_timestamp_seconds, so that its age tells a stopped writer from a quiet network (the daemon is not asked again).]:SECONDS:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_follow-units() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print JSON\: one object per target (per change for watch), one per line.]'
        '--no-daemon[Do not ask reachabilityd; run the engine in this process.]'
        '--daemon[Ask reachabilityd only; fail when it cannot be reached.]'
        '--stop-delay[Seconds a condition must fail before its target is stopped.]:seconds:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_reachctl_help() {
    local -i ret=1
    local -ar arg_specs=(
        '*:subcommands:'
        '--version[Show the version.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

if [[ "${funcstack[1]}" = _reachctl ]]; then
    _reachctl "${@}"
else
    compdef _reachctl reachctl
fi
