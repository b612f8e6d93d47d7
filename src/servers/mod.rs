//! (module placeholder; see ARCHITECTURE.md)
