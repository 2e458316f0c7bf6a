function __reachctl_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __reachctl_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __reachctl_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __reachctl_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __reachctl_parse_tokens -S
    set -l unparsed_tokens (__reachctl_tokens -pc)
    switch $unparsed_tokens[1]
    case 'reachctl'
        __reachctl_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'status'
            __reachctl_parse_subcommand 0 'json' 'no-daemon' 'daemon' 'version' 'h/help'
        case 'query'
            __reachctl_parse_subcommand -r 1 'json' 'no-daemon' 'daemon' 'from=' 'version' 'h/help'
        case 'watch'
            __reachctl_parse_subcommand -r 1 'json' 'no-daemon' 'daemon' 'from=' 'version' 'h/help'
        case 'wait'
            __reachctl_parse_subcommand -r 1 'json' 'no-daemon' 'daemon' 'any' '4/ipv4' '6/ipv6' 'unmetered' 'full' 'timeout=' 'q/quiet' 'version' 'h/help'
        case 'list'
            __reachctl_parse_subcommand 0 'json' 'no-daemon' 'daemon' 'version' 'h/help'
        case 'doctor'
            __reachctl_parse_subcommand 0 'version' 'h/help'
        case 'metrics'
            __reachctl_parse_subcommand 0 'textfile=' 'liveness=' 'version' 'h/help'
        case 'follow-units'
            __reachctl_parse_subcommand 0 'json' 'no-daemon' 'daemon' 'stop-delay=' 'version' 'h/help'
        case 'help'
            __reachctl_parse_subcommand -r 1 'version'
        end
    end
end

function __reachctl_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __reachctl_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __reachctl_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __reachctl_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__reachctl_tokens -p)
    if test -z "$(__reachctl_tokens -t)"
        set -l index (count (__reachctl_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'reachctl' -f
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'status' -d 'Show the internet\'s reachability (the default command).'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'query' -d 'Show the reachability of each TARGET once.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'watch' -d 'Show each TARGET\'s reachability, then a line for every change, until interrupted.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'wait' -d 'Wait until every TARGET is reachable (without one: the internet), then exit.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'list' -d 'Show the targets reachabilityd watches for your user (for every user, as root), with their state.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'doctor' -d 'Check the installed service: its files, the bus\'s policy and activation, and an answer.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'metrics' -d 'Print reachabilityd\'s metrics (Prometheus text format); root and the adm group only.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'follow-units' -d 'Start and stop reachability-online.target and reachability-unmetered.target as the internet comes and goes.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_positional "reachctl" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl status" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl status" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl status" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl status" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" from' -l 'from' -d 'A local address: answer for packets from it (ip route get TARGET from LOCAL; each TARGET an address literal); with no TARGET, whether LOCAL is configured on a link that can carry packets.' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl query" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" from' -l 'from' -d 'A local address: answer for packets from it (ip route get TARGET from LOCAL; each TARGET an address literal); with no TARGET, whether LOCAL is configured on a link that can carry packets.' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl watch" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" any' -l 'any' -d 'Return when any one TARGET is reached, not every one.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" 4 ipv4' -s '4' -l 'ipv4' -d 'Reachable over IPv4.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" 6 ipv6' -s '6' -l 'ipv6' -d 'Reachable over IPv6.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" unmetered' -l 'unmetered' -d 'On a connection that is not metered.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" full' -l 'full' -d 'With full connectivity (NetworkManager\'s check), not only a route.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" timeout' -l 'timeout' -d 'Give up after this long (0: wait forever).' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" q quiet' -s 'q' -l 'quiet' -d 'Print nothing; the exit status says it.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl wait" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl list" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl list" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl list" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl list" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl doctor" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl doctor" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl metrics" textfile' -l 'textfile' -d 'Keep FILE up to date instead of printing once.' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl metrics" liveness' -l 'liveness' -d 'With --textfile: rewrite FILE at least this often, with the time in reachctl_textfile_updated_timestamp_seconds, so that its age tells a stopped writer from a quiet network (the daemon is not asked again).' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl metrics" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl metrics" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" json' -l 'json' -d 'Print JSON: one object per target (per change for watch), one per line.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" no-daemon' -l 'no-daemon' -d 'Do not ask reachabilityd; run the engine in this process.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" daemon' -l 'daemon' -d 'Ask reachabilityd only; fail when it cannot be reached.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" stop-delay' -l 'stop-delay' -d 'Seconds a condition must fail before its target is stopped.' -rfka ''
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" version' -l 'version' -d 'Show the version.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl follow-units" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'reachctl' -n '__reachctl_should_offer_completions_for_flags_or_options "reachctl help" version' -l 'version' -d 'Show the version.'
