// Prints the flags of the internet and of each argument, in Apple's bits.
import Reachability

print("internet", Reachability()?.flags ?? 0)
for name in CommandLine.arguments.dropFirst() {
    print(name, Reachability(hostname: name)?.flags ?? 0)
}
